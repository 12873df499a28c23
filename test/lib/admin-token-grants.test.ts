import assert from 'node:assert/strict';
import { createAdminToken, getAdminToken, revokeAdminToken } from '../../src/lib/admin-tokens.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';

const code = (expected: string) => (error: unknown) => error instanceof LicenseServerError && error.code === expected;

/** What the HTTP API asks of the core beyond the command line: who grants, who revokes. */
forEachEngine('admin tokens made and revoked by a token', (fixture) => {
  let db: Database;
  before(async () => {
    db = await fixture.freshDatabase();
  });

  it('a token grants only scopes it holds; admin holds all; the command line (no grantor) any', async () => {
    const asker = { actor: 'token:provisioner' };
    await assert.rejects(createAdminToken(db, { name: 'wider', scopes: ['read', 'backups'], grantorScopes: ['read', 'licenses'] }, asker), (error: unknown) => {
      assert.ok(code('TOKEN_SCOPE')(error));
      assert.match((error as Error).message, /does not hold "backups"$/);
      return true;
    });
    await assert.rejects(getAdminToken(db, '00000000-0000-4000-8000-000000000000'), code('TOKEN_NOT_FOUND'));
    assert.deepEqual((await createAdminToken(db, { name: 'narrower', scopes: ['read'], grantorScopes: ['read', 'licenses'] }, asker)).record.scopes, ['read']);
    assert.deepEqual((await createAdminToken(db, { name: 'by-admin', scopes: ['restore', 'metrics'], grantorScopes: ['admin'] }, asker)).record.scopes, ['restore', 'metrics']);
    assert.deepEqual((await createAdminToken(db, { name: 'by-cli', scopes: ['admin'] }, { actor: 'cli:ops' })).record.scopes, ['admin']);
  });

  it('the token of the context is revoked only with allowSelf; another actor revokes it without', async () => {
    const { record } = await createAdminToken(db, { name: 'self', scopes: ['admin'] }, { actor: 'cli:ops' });
    await assert.rejects(revokeAdminToken(db, record.id, { actor: 'token:self' }), code('TOKEN_SELF_REVOKE'));
    await assert.rejects(revokeAdminToken(db, 'self', { actor: 'token:self' }), code('TOKEN_SELF_REVOKE'));
    assert.equal((await getAdminToken(db, record.id)).revoked_at, null);
    assert.ok((await revokeAdminToken(db, record.id, { actor: 'token:self' }, { allowSelf: true })).revoked_at);
    const { record: other } = await createAdminToken(db, { name: 'other', scopes: ['read'] }, { actor: 'cli:ops' });
    assert.ok((await revokeAdminToken(db, other.id, { actor: 'token:self-2' })).revoked_at);
  });
});
