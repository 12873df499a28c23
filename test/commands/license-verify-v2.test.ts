import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { signEd25519 } from '../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../../src/lib/offline/format.js';
import { ok, runCli } from '../support/cli.js';

const vectors = new URL('../vectors/', import.meta.url);
const lic = JSON.parse(readFileSync(new URL('offline-license-v1.json', vectors), 'utf8'));
const v2 = JSON.parse(readFileSync(new URL('offline-license-v2.json', vectors), 'utf8'));
const vector = v2.vectors[0];

/** The v2 vector's payload, valid from yesterday for a year (the vector's own window ends in 2026). */
function currentV2File(): string {
  const day = 86_400_000;
  const second = (ms: number) => `${new Date(ms).toISOString().slice(0, 19)}Z`;
  const payload = { ...vector.payload, valid_from: second(Date.now() - day), valid_until: second(Date.now() + 365 * day), issued_at: second(Date.now() - day) } as LicenseFilePayload;
  return encodeLicenseFile(payload, signEd25519(canonicalPayloadBytes(payload), Buffer.from(lic.signing_secret_key_hex, 'hex')));
}

describe('license verify and license inspect read .lic version 2 (request_nonce)', () => {
  let work: string;
  const cli = (...args: string[]) => runCli(args, { cwd: work });

  before(() => {
    work = mkdtempSync(path.join(tmpdir(), 'license-verify-v2-'));
    writeFileSync(path.join(work, 'signing-key.pem'), lic.public_key_pem);
    writeFileSync(path.join(work, 'v2.lic'), currentV2File());
    writeFileSync(path.join(work, 'v3.lic'), v2.refuse.find((r: { name: string }) => r.name === 'version-3').file);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('verify: valid, the nonce in --json and in the text, the key unsealed', async () => {
    const json = ok(await cli('license', 'verify', 'v2.lic', '--public-key', 'signing-key.pem', '--hardware-id', vector.hardware_id, '--json')).json();
    assert.deepEqual([json.valid, json.license.version, json.license.request_nonce, json.decryption_key_unsealed], [true, 2, vector.request_nonce, true]);
    const text = ok(await cli('license', 'verify', 'v2.lic', '--public-key', 'signing-key.pem', '--hardware-id', vector.hardware_id)).stdout;
    assert.match(text, new RegExp(`^request nonce:\\s+${vector.request_nonce} \\(the file answers the activation request with this nonce\\)$`, 'm'));
  });

  it('inspect: version 2 and its nonce; version 3 is refused as an unsupported version (exit 8)', async () => {
    const json = ok(await cli('license', 'inspect', 'v2.lic', '--public-key', 'signing-key.pem', '--json')).json();
    assert.deepEqual([json.version, json.request_nonce, json.signature], [2, vector.request_nonce, 'valid']);
    assert.match(ok(await cli('license', 'inspect', 'v2.lic', '--public-key', 'signing-key.pem')).stdout, new RegExp(`^request nonce:\\s+${vector.request_nonce}$`, 'm'));
    const refused = await cli('license', 'inspect', 'v3.lic', '--public-key', 'signing-key.pem');
    assert.equal(refused.code, 8, refused.stderr);
    assert.match(refused.stderr, /license file has format version 3; this license-server reads versions 1 and 2/);
  });
});
