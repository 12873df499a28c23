import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { sealDecryptionKey } from '../../src/lib/offline/binding.js';
import { signEd25519 } from '../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../../src/lib/offline/format.js';
import { ok, runCli } from '../support/cli.js';

const vectors = new URL('../vectors/', import.meta.url);
const lic = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectors), 'utf8'));
const bound = lic.vectors.find((vector: { name: string }) => vector.name === 'bound-with-key');
const decryptionKey = Buffer.from(bound.binding.decryption_key_hex, 'hex');

/**
 * A file bound to `hardwareId` as a server that did not apply today's checkout rules wrote it
 * (the reader vectors hold such files, but their window ends in 2026), valid from yesterday for a
 * year, with the decryption key sealed to the ID when `withKey`.
 */
function fileBoundTo(hardwareId: string, withKey: boolean): string {
  const { encrypted_key: _sealed, ...rest } = bound.payload as LicenseFilePayload;
  const day = 86_400_000;
  const second = (ms: number) => new Date(ms).toISOString().slice(0, 19) + 'Z';
  const payload = {
    ...rest,
    valid_from: second(Date.now() - day),
    valid_until: second(Date.now() + 365 * day),
    issued_at: second(Date.now() - day),
    hardware_id: hardwareId,
    ...(withKey ? { encrypted_key: sealDecryptionKey(decryptionKey, hardwareId, rest.license_id) } : {}),
  } as LicenseFilePayload;
  return encodeLicenseFile(payload, signEd25519(canonicalPayloadBytes(payload), Buffer.from(lic.signing_secret_key_hex, 'hex')));
}

describe('license verify --hardware-id (docs/offline-license-format.md sections 3 and 8)', () => {
  let work: string;
  const verify = (file: string, hardwareId: string) => runCli(['license', 'verify', file, '--public-key', 'signing-key.pem', '--hardware-id', hardwareId, '--json'], { cwd: work });

  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-verify-hwid-'));
    writeFileSync(path.join(work, 'signing-key.pem'), readFileSync(new URL('signing-key.pem', vectors)));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('takes every hardware ID a reader accepts in a file: the machine a file is bound to can verify it, whatever the checkout rules', async () => {
    // As the reader vectors hardware-id-256-code-units and hardware-id-control-character: 512 bytes of UTF-8, and U+0007.
    for (const [name, hardwareId, withKey] of [['long', '\u00fc'.repeat(256), true], ['bell', 'HW-\u0007-bell', false]] as const) {
      writeFileSync(path.join(work, `${name}.lic`), fileBoundTo(hardwareId, withKey));
      const report = ok(await verify(`${name}.lic`, hardwareId)).json();
      assert.deepEqual([report.valid, report.hardware_checked, report.decryption_key_unsealed], [true, true, withKey], name);
      assert.equal(report.license.hardware_id, hardwareId);
      // Another machine is still told apart.
      const other = await verify(`${name}.lic`, `${hardwareId}x`);
      assert.equal(other.code, 11, other.stderr);
      assert.equal(other.json().error.code, 'HARDWARE_MISMATCH');
    }
  });

  it('refuses an empty --hardware-id as INVALID_HARDWARE_ID', async () => {
    writeFileSync(path.join(work, 'plain.lic'), fileBoundTo('HW-1', false));
    const empty = await verify('plain.lic', '');
    assert.equal(empty.code, 2, empty.stderr);
    assert.deepEqual(empty.json().error, { code: 'INVALID_HARDWARE_ID', message: '--hardware-id must not be empty' });
  });
});
