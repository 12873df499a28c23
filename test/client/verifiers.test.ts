import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { verifyGraceToken, verifyLicenseFile } from '../../src/client/index.js';

const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');
const source = (path: string) => readFileSync(new URL(`../../src/${path}`, import.meta.url), 'utf8');
const vectors = new URL('../vectors/', import.meta.url);
const keySet = readFileSync(new URL('key-set.pem', vectors), 'utf8');

/** The option names of the table that follows `heading` in docs/client.md's "Verifying without a client". */
function documentedOptions(heading: string): string[] {
  const section = /^## Verifying without a client\n([\s\S]*?)^## /m.exec(doc)?.[1];
  assert.ok(section, 'docs/client.md has a section "Verifying without a client"');
  const after = section.slice(section.indexOf(heading));
  const table = /\| Option \| Default \| Meaning \|\n\|[-|]+\|\n((?:\|.*\n)+)/.exec(after)![1]!;
  return [...table.matchAll(/^\| `([A-Za-z]+)` \| ([^|]+) \|/gm)].map((m) => m[1]!);
}

describe('the verifiers license-server/client exports (docs/client.md, "Verifying without a client")', () => {
  it('documents every option of verifyLicenseFile, as VerifyOptions declares them', () => {
    const declared = /export interface VerifyOptions \{([\s\S]*?)\n\}/.exec(source('lib/offline/verify.ts'))![1]!;
    const names = [...declared.matchAll(/^ {2}readonly ([A-Za-z]+)\??:/gm)].map((m) => m[1]!);
    assert.deepEqual(names.sort(), ['hardwareId', 'leaveMachineKeySealed', 'machinePrivateKey', 'now', 'publicKey', 'skipHardwareCheck']);
    assert.deepEqual(documentedOptions('**`verifyLicenseFile(file, options)`**').sort(), names);
  });

  it('documents every option of verifyGraceToken, as its signature declares them', () => {
    const declared = /export function verifyGraceToken\([\s\S]*?options: \{([^}]*)\}/.exec(source('lib/licensing/grace-token.ts'))![1]!;
    const names = [...declared.matchAll(/([A-Za-z]+)\?:/g)].map((m) => m[1]!);
    assert.deepEqual(names.sort(), ['hardwareId', 'notBeforeLeewaySeconds', 'now']);
    assert.deepEqual(documentedOptions('**`verifyGraceToken(token, publicKey, options?)`**').sort(), names);
  });

  it('behave as the tables say: now is the time checked, hardwareId is compared in NFC, the leeway moves nbf', () => {
    const token = JSON.parse(readFileSync(new URL('grace-token.json', vectors), 'utf8'));
    const iat = new Date('2026-11-22T10:00:00Z');
    assert.equal(verifyGraceToken(token.token, keySet, { now: iat, hardwareId: token.nfc_equivalent_hardware_id }).claims.iat, iat.getTime() / 1000);
    assert.throws(() => verifyGraceToken(token.token, keySet, { now: new Date(iat.getTime() - 301_000) }), { code: 'GRACE_TOKEN_INVALID' });
    assert.equal(verifyGraceToken(token.token, keySet, { now: new Date(iat.getTime() - 301_000), notBeforeLeewaySeconds: 301 }).claims.iat, iat.getTime() / 1000);
    assert.throws(() => verifyGraceToken(token.token, keySet, { now: new Date('2026-11-25T10:00:00Z') }), { code: 'GRACE_TOKEN_EXPIRED' });

    const bound = readFileSync(new URL('bound-with-key.lic', vectors), 'utf8');
    const now = new Date('2026-06-01T00:00:00Z');
    const opened = verifyLicenseFile(bound, { publicKey: keySet, now, hardwareId: 'HW-4f2a-9c1e-u\u0308' });
    assert.equal(opened.hardwareChecked, true);
    assert.equal(opened.decryptionKey?.length, 32);
    assert.throws(() => verifyLicenseFile(bound, { publicKey: keySet, now }), { code: 'HARDWARE_ID_REQUIRED' });
    const skipped = verifyLicenseFile(bound, { publicKey: keySet, now, skipHardwareCheck: true });
    assert.deepEqual([skipped.hardwareChecked, skipped.decryptionKey], [false, undefined]);
    assert.throws(() => verifyLicenseFile(bound, { publicKey: keySet, now: new Date('2027-01-01T00:00:00Z'), hardwareId: 'HW-4f2a-9c1e-ü' }), { code: 'LICENSE_EXPIRED' });
  });
});
