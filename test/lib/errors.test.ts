import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { ERROR_TABLE, EXIT, LicenseServerError } from '../../src/lib/errors.js';

describe('error table', () => {
  const doc = readFileSync(new URL('../../docs/errors.md', import.meta.url), 'utf8');
  const documented = new Map<string, { exit: number; http: number }>();
  for (const match of doc.matchAll(/^\| `([A-Z_]+)` \| (\d+) \| (\d+) \|/gm)) {
    documented.set(match[1]!, { exit: Number(match[2]), http: Number(match[3]) });
  }

  it('is documented in docs/errors.md code by code, with the same exit code and HTTP status', () => {
    for (const [code, spec] of Object.entries(ERROR_TABLE)) {
      assert.deepEqual(documented.get(code), { exit: spec.exit, http: spec.http }, `docs/errors.md on ${code}`);
    }
    assert.deepEqual([...documented.keys()].sort(), Object.keys(ERROR_TABLE).sort(), 'no code is documented that does not exist');
  });

  it('describes LICENSE_FILE_MALFORMED and GRACE_TOKEN_INVALID as the format documents do (a .lic file need not be canonical JSON; a token may be refused for a claim or its time)', () => {
    const row = (code: string) => doc.split('\n').find((line) => line.startsWith(`| \`${code}\` |`))!;
    // offline-license-format.md section 2 rule 5: a reader MUST NOT require the RFC 8785 form.
    assert.doesNotMatch(row('LICENSE_FILE_MALFORMED'), /not in RFC 8785 form|not canonical JSON/);
    assert.match(row('LICENSE_FILE_MALFORMED'), /need not be in RFC 8785 form/);
    assert.match(row('LICENSE_FILE_MALFORMED'), /a member twice/);
    // Every kind of refusal of grace-token.md "Verifying" (its vector holds one token of each).
    for (const reason of ['base64url', 'member twice', '`typ` not `JWT`', '`crit` present', 'missing or of another type', 'not valid yet']) {
      assert.ok(row('GRACE_TOKEN_INVALID').includes(reason), reason);
    }
  });

  it('documents every exit code', () => {
    for (const exit of Object.values(EXIT)) assert.match(doc, new RegExp(`^\\| ${exit} \\| `, 'm'), `exit ${exit}`);
  });

  it('carries the exit code, HTTP status and hint of its code', () => {
    const error = new LicenseServerError('CUSTOMER_NOT_FOUND', 'no customer');
    assert.equal(error.exitCode, 4);
    assert.equal(error.httpStatus, 404);
    assert.match(error.hint!, /customer list/);
    assert.equal(new LicenseServerError('CUSTOMER_NOT_FOUND', 'x', { hint: 'custom' }).hint, 'custom');
  });
});
