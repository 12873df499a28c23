import assert from 'node:assert/strict';
import { authenticateAdminToken, createAdminToken, listAdminTokens, revokeAdminToken } from '../../../src/lib/admin-tokens.js';
import { listAudit } from '../../../src/lib/audit.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, getCustomer, listCustomers, setCustomerActive } from '../../../src/lib/customers.js';
import { createEntitlement, listEntitlements } from '../../../src/lib/licensing/entitlements.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense, getLicense, getLicenseDecryptionKey, listLicenses, setLicenseActive } from '../../../src/lib/licensing/licenses.js';
import { ensureSigningKey, loadKeyPair } from '../../../src/lib/signing-keys/keys.js';
import { currentVersion, migrate, MIGRATIONS, SCHEMA_VERSION } from '../../../src/lib/storage/migrations.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const context: OperationContext = { actor: 'cli:tester' };
const inAYear = () => new Date(Date.now() + 365 * 86_400_000);

async function rejectsWith(promise: Promise<unknown>, code: string): Promise<LicenseServerError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof LicenseServerError, `expected a LicenseServerError, got ${String(error)}`);
    assert.equal(error.code, code, error.message);
    return error;
  }
  assert.fail(`expected ${code}, but the operation succeeded`);
}

async function count(db: Database, table: string): Promise<number> {
  const rows = await db.query<{ n: number }>(`SELECT count(*) AS n FROM ${table}`);
  return Number(rows[0]!.n);
}

forEachEngine('storage contract', (fixture) => {
  describe('migrations', () => {
    it('bring a new database to the current schema version, and are idempotent', async () => {
      const db = await fixture.freshDatabase();
      assert.equal(await currentVersion(db), SCHEMA_VERSION);
      assert.deepEqual(await migrate(db), { from: SCHEMA_VERSION, to: SCHEMA_VERSION });
      // One row per migration; versions need not be consecutive (each branch of work takes its own).
      assert.equal(await count(db, 'schema_migrations'), MIGRATIONS.length);
    });

    it('apply once when several connections migrate the same empty database at the same moment', async () => {
      const url = await fixture.freshUrl();
      const dbs = await Promise.all(Array.from({ length: 4 }, () => openDatabase(url, { migrate: false })));
      try {
        const results = await Promise.all(dbs.map((db) => migrate(db)));
        assert.equal(results.filter((r) => r.from === 0).length, 1, 'exactly one connection did the migration');
        assert.equal(await count(dbs[0]!, 'schema_migrations'), MIGRATIONS.length);
      } finally {
        await Promise.all(dbs.map((db) => db.close()));
      }
    });

    it('refuse a database migrated by a newer release (DATABASE_SCHEMA_TOO_NEW)', async () => {
      const url = await fixture.freshUrl();
      const db = await openDatabase(url);
      await db.execute('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)', [
        SCHEMA_VERSION + 1, 'from the future', new Date().toISOString(),
      ]);
      await db.close();
      await rejectsWith(openDatabase(url), 'DATABASE_SCHEMA_TOO_NEW');
    });
  });

  describe('customers', () => {
    let db: Database;
    before(async () => {
      db = await fixture.freshDatabase();
    });

    it('are created active, read back, listed oldest first and filtered by state', async () => {
      const first = await createCustomer(db, { name: 'Acme & "Söhne" <GmbH> \\ 🚀' }, { ...context, clock: () => new Date('2026-01-01T00:00:00Z') });
      const second = await createCustomer(db, { name: '  Globex  ' }, { ...context, clock: () => new Date('2026-01-01T00:00:01Z') });
      assert.equal(first.name, 'Acme & "Söhne" <GmbH> \\ 🚀');
      assert.equal(second.name, 'Globex', 'surrounding spaces are trimmed');
      assert.equal(first.active, true);
      assert.deepEqual(await getCustomer(db, first.id.toUpperCase()), first);
      const listed = await listCustomers(db);
      assert.deepEqual(listed.map((c) => c.id), [first.id, second.id]);
      await setCustomerActive(db, second.id, false, context);
      assert.deepEqual((await listCustomers(db, { active: true })).map((c) => c.id), [first.id]);
      assert.deepEqual((await listCustomers(db, { active: false })).map((c) => c.id), [second.id]);
      assert.deepEqual((await listCustomers(db, { limit: 1, offset: 1 })).map((c) => c.id), [second.id]);
    });

    it('audit each change, and only real changes', async () => {
      const customer = await createCustomer(db, { name: 'Initech' }, { actor: 'cli:alice' });
      await setCustomerActive(db, customer.id, false, context);
      await setCustomerActive(db, customer.id, false, context);
      await setCustomerActive(db, customer.id, true, { actor: 'token:deploy' });
      const entries = await listAudit(db, { entityId: customer.id });
      assert.deepEqual(
        entries.map((e) => [e.action, e.actor]),
        [['customer.activated', 'token:deploy'], ['customer.deactivated', 'cli:tester'], ['customer.created', 'cli:alice']],
      );
      assert.deepEqual(entries[2]!.details, { name: 'Initech' });
    });

    it('refuse empty names, malformed ids and unknown ids without writing anything', async () => {
      const before = await count(db, 'audit_log');
      await rejectsWith(createCustomer(db, { name: '   ' }, context), 'INVALID_INPUT');
      await rejectsWith(createCustomer(db, { name: 'a\u0007b' }, context), 'INVALID_INPUT');
      await rejectsWith(getCustomer(db, 'not-a-uuid'), 'INVALID_ID');
      await rejectsWith(getCustomer(db, '00000000-0000-4000-8000-000000000000'), 'CUSTOMER_NOT_FOUND');
      await rejectsWith(setCustomerActive(db, '00000000-0000-4000-8000-000000000000', false, context), 'CUSTOMER_NOT_FOUND');
      assert.equal(await count(db, 'audit_log'), before);
    });
  });

  describe('entitlements', () => {
    let db: Database;
    before(async () => {
      db = await fixture.freshDatabase();
    });

    it('are listed by code in code point order on every engine', async () => {
      for (const code of ['b', 'B', 'a.2', 'a-1', 'A_1']) await createEntitlement(db, { code, name: `Feature ${code}` }, context);
      assert.deepEqual((await listEntitlements(db)).map((e) => e.code), ['A_1', 'B', 'a-1', 'a.2', 'b']);
    });

    it('refuse a duplicate code (ENTITLEMENT_CODE_EXISTS) and bad codes, writing nothing', async () => {
      const before = await count(db, 'audit_log');
      await rejectsWith(createEntitlement(db, { code: 'b', name: 'Again' }, context), 'ENTITLEMENT_CODE_EXISTS');
      for (const code of ['', 'has space', 'colon:here', '-leading', 'x'.repeat(65), 'ü']) {
        await rejectsWith(createEntitlement(db, { code, name: 'Bad' }, context), 'INVALID_ENTITLEMENT_CODE');
      }
      assert.equal(await count(db, 'audit_log'), before);
      assert.equal(await count(db, 'entitlements'), 5);
    });
  });

  describe('licenses', () => {
    let db: Database;
    let customerId: string;
    before(async () => {
      db = await fixture.freshDatabase();
      customerId = (await createCustomer(db, { name: 'Umbrella' }, context)).id;
      await createEntitlement(db, { code: 'seats', name: 'Seats' }, context);
      await createEntitlement(db, { code: 'export', name: 'Export' }, context);
    });

    it('are created with entitlements, limits and a 32-byte decryption key, and found by id or key', async () => {
      const validUntil = inAYear();
      const license = await createLicense(
        db,
        {
          customerId,
          type: 'hybrid',
          validUntil,
          entitlements: [{ code: 'seats', usageLimit: 25 }, { code: 'export', usageLimit: null }],
          withDecryptionKey: true,
        },
        context,
      );
      assert.match(license.key, /^[0-9A-HJKMNP-TV-Z]{4}(-[0-9A-HJKMNP-TV-Z]{4}){6}$/);
      assert.equal(license.key_prefix, license.key.slice(0, 8));
      assert.equal(license.customer_name, 'Umbrella');
      assert.equal(license.type, 'hybrid');
      assert.equal(license.active, true);
      assert.equal(license.has_decryption_key, true);
      assert.equal(license.valid_until, new Date(Math.floor(validUntil.getTime() / 1000) * 1000).toISOString());
      assert.deepEqual(license.entitlements, [
        { code: 'export', name: 'Export', usage_limit: null, used: 0, remaining: null },
        { code: 'seats', name: 'Seats', usage_limit: 25, used: 0, remaining: 25 },
      ]);
      const key = await getLicenseDecryptionKey(db, license.id);
      assert.equal(key?.length, 32);
      assert.deepEqual(await getLicense(db, license.key), license);
      const typed = ` ${license.key.toLowerCase().replace(/0/g, 'o').replace(/1/g, 'l')} `;
      assert.deepEqual(await getLicense(db, typed), license, 'case, spaces and look-alikes are forgiven');
      const audit = await listAudit(db, { entityId: license.id });
      assert.equal(audit[0]!.action, 'license.created');
      assert.ok(!JSON.stringify(audit).includes(license.key), 'the audit log never holds a whole license key');
      assert.ok(!JSON.stringify(audit).includes(key!.toString('hex')), 'nor a decryption key');
    });

    it('without a decryption key have none', async () => {
      const license = await createLicense(db, { customerId, type: 'time_based', validUntil: inAYear() }, context);
      assert.equal(license.has_decryption_key, false);
      assert.equal(await getLicenseDecryptionKey(db, license.id), null);
      assert.deepEqual(license.entitlements, []);
    });

    it('are listed with filters and (de)activated with an audit entry per change', async () => {
      const usage = await createLicense(db, { customerId, type: 'usage_based', validUntil: inAYear() }, context);
      await setLicenseActive(db, usage.key, false, context);
      await setLicenseActive(db, usage.id, false, context);
      assert.deepEqual((await listLicenses(db, { type: 'usage_based' })).map((l) => [l.id, l.active]), [[usage.id, false]]);
      assert.ok((await listLicenses(db, { active: false })).every((l) => !l.active));
      assert.equal((await listLicenses(db, { customerId })).length, 3);
      assert.deepEqual((await listAudit(db, { entityId: usage.id })).map((e) => e.action), ['license.deactivated', 'license.created']);
    });

    it('refuse bad input with stable codes and leave no trace', async () => {
      const licenses = await count(db, 'licenses');
      const audit = await count(db, 'audit_log');
      const valid = { customerId, type: 'time_based', validUntil: inAYear() };
      await rejectsWith(createLicense(db, { ...valid, type: 'perpetual' }, context), 'INVALID_LICENSE_TYPE');
      await rejectsWith(createLicense(db, { ...valid, customerId: 'nope' }, context), 'INVALID_ID');
      await rejectsWith(createLicense(db, { ...valid, customerId: '00000000-0000-4000-8000-000000000000' }, context), 'CUSTOMER_NOT_FOUND');
      await rejectsWith(createLicense(db, { ...valid, validUntil: '2020-01-01' }, context), 'INVALID_VALIDITY');
      await rejectsWith(createLicense(db, { ...valid, validUntil: '31/12/2030' }, context), 'INVALID_DATE');
      await rejectsWith(createLicense(db, { ...valid, validUntil: '2030-02-30' }, context), 'INVALID_DATE');
      await rejectsWith(createLicense(db, { ...valid, validFrom: '2031-01-01', validUntil: '2030-12-31' }, context), 'INVALID_VALIDITY');
      await rejectsWith(
        createLicense(db, { ...valid, entitlements: [{ code: 'seats', usageLimit: 1 }, { code: 'missing', usageLimit: null }] }, context),
        'ENTITLEMENT_NOT_FOUND',
      );
      await rejectsWith(
        createLicense(db, { ...valid, entitlements: [{ code: 'seats', usageLimit: 1 }, { code: 'seats', usageLimit: 2 }] }, context),
        'INVALID_INPUT',
      );
      await rejectsWith(createLicense(db, { ...valid, entitlements: [{ code: 'seats', usageLimit: -1 }] }, context), 'INVALID_INPUT');
      await rejectsWith(getLicense(db, 'ABCD'), 'INVALID_ID');
      await rejectsWith(getLicense(db, '0000-0000-0000-0000-0000-0000-0000'), 'LICENSE_NOT_FOUND');
      assert.equal(await count(db, 'licenses'), licenses);
      assert.equal(await count(db, 'license_entitlements'), 2);
      assert.equal(await count(db, 'audit_log'), audit);
    });

    it('never echo a whole license key in an error message', async () => {
      const key = 'ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ-ZZZZ';
      const error = await rejectsWith(getLicense(db, key), 'LICENSE_NOT_FOUND');
      assert.ok(!error.message.includes(key), error.message);
    });
  });

  describe('admin tokens', () => {
    let db: Database;
    before(async () => {
      db = await fixture.freshDatabase();
    });

    it('are shown once, stored only as a hash, authenticate until revoked', async () => {
      const issued = await createAdminToken(db, { name: 'deploy' }, context);
      assert.match(issued.token, /^lsat_[A-Za-z0-9_-]{43}$/);
      const stored = await db.query('SELECT * FROM admin_tokens');
      assert.ok(!JSON.stringify(stored).includes(issued.token.slice(5)), 'the token itself is not stored');
      assert.deepEqual(await authenticateAdminToken(db, issued.token), { actor: 'token:deploy', tokenId: issued.record.id, scopes: ['admin'] });
      assert.equal(await authenticateAdminToken(db, `${issued.token}x`), null);
      assert.equal(await authenticateAdminToken(db, ''), null);
      assert.ok((await listAdminTokens(db))[0]!.last_used_at, 'last use is recorded');
      await revokeAdminToken(db, 'deploy', context);
      assert.equal(await authenticateAdminToken(db, issued.token), null);
      assert.equal((await listAdminTokens(db)).length, 0);
      assert.equal((await listAdminTokens(db, { includeRevoked: true })).length, 1);
      // Never reused, so that `token:deploy` in the audit log names one token.
      await rejectsWith(createAdminToken(db, { name: 'deploy' }, context), 'TOKEN_NAME_EXISTS');
      assert.deepEqual(
        (await listAudit(db, { entityType: 'admin_token' })).map((e) => e.action),
        ['token.revoked', 'token.created'],
      );
    });

    it('refuse a second live token of the same name and unknown references', async () => {
      await createAdminToken(db, { name: 'ci' }, context);
      await rejectsWith(createAdminToken(db, { name: 'ci' }, context), 'TOKEN_NAME_EXISTS');
      await rejectsWith(revokeAdminToken(db, 'nobody', context), 'TOKEN_NOT_FOUND');
    });

    it('accept the bootstrap token from the configuration', async () => {
      const bootstrap = 'a-bootstrap-token-of-enough-length';
      assert.deepEqual(await authenticateAdminToken(db, bootstrap, { bootstrapToken: bootstrap }), { actor: 'config:admin_token', tokenId: null, scopes: ['admin'] });
      assert.equal(await authenticateAdminToken(db, bootstrap), null);
    });
  });

  describe('signing key', () => {
    it('is generated only by ensureSigningKey, once, audited once, and returned unchanged afterwards', async () => {
      const db = await fixture.freshDatabase();
      await assert.rejects(loadKeyPair(db), (error: LicenseServerError) => error.code === 'SIGNING_KEY_MISSING', 'signing never generates a key');
      assert.equal(await count(db, 'signing_keys'), 0);
      const { created: firstCreated, ...first } = await ensureSigningKey(db, context);
      const { created: secondCreated, ...second } = await ensureSigningKey(db, context);
      assert.deepEqual([firstCreated, secondCreated], [true, false]);
      assert.deepEqual(second, first);
      assert.match(first.public_key_pem, /^-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA[A-Za-z0-9+/]{43}=\n-----END PUBLIC KEY-----\n$/);
      assert.equal(await count(db, 'signing_keys'), 1);
      assert.equal((await listAudit(db, { action: 'signing_key.created' })).length, 1);
      const pair = await loadKeyPair(db);
      assert.equal(pair.keyId, first.key_id);
      assert.equal(first.key_id, first.fingerprint.slice(0, 16));
      assert.equal(first.state, 'active');
      assert.equal(pair.secretKey.length, 32);
      assert.ok(!JSON.stringify(first).includes(Buffer.from(pair.secretKey).toString('base64')));
    });

    it('ends as exactly one key when many connections create it at the same moment', async () => {
      const url = await fixture.freshUrl();
      const dbs = await Promise.all(Array.from({ length: 6 }, () => openDatabase(url)));
      try {
        const keys = await Promise.all(dbs.map((db) => ensureSigningKey(db, context)));
        assert.equal(new Set(keys.map((k) => k.public_key_pem)).size, 1);
        assert.equal(await count(dbs[0]!, 'signing_keys'), 1);
        assert.equal((await listAudit(dbs[0]!, { action: 'signing_key.created' })).length, 1);
      } finally {
        await Promise.all(dbs.map((db) => db.close()));
      }
    });
  });

  describe('transactions', () => {
    it('roll back every statement when the work fails', async () => {
      const db = await fixture.freshDatabase();
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)', [
            '11111111-1111-4111-8111-111111111111', 'Ghost', true, new Date().toISOString(), new Date().toISOString(),
          ]);
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.equal(await count(db, 'customers'), 0);
    });

    it('commit concurrent transactions independently: a failing one rolls back alone', async () => {
      const db = await fixture.freshDatabase();
      const results = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) =>
          db.transaction(async (tx) => {
            await tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [
              `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, `code-${i}`, 'x', new Date().toISOString(),
            ]);
            if (i % 3 === 0) throw new Error(`refused ${i}`);
            // A duplicate code fails inside the transaction; it must not take the others down.
            if (i % 5 === 1) await tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [
              `10000000-0000-4000-8000-${String(i).padStart(12, '0')}`, `code-${i}`, 'x', new Date().toISOString(),
            ]);
            return i;
          }),
        ),
      );
      const committed = results.flatMap((r, i) => (r.status === 'fulfilled' ? [i] : []));
      assert.deepEqual(committed, Array.from({ length: 30 }, (_, i) => i).filter((i) => i % 3 !== 0 && i % 5 !== 1));
      const codes = (await db.query<{ code: string }>('SELECT code FROM entitlements')).map((r) => r.code).sort();
      assert.deepEqual(codes, committed.map((i) => `code-${i}`).sort());
    });

    // Issue 35, item 11: on PostgreSQL they overlapped on the transaction's one connection,
    // which pg warns of (pg 9 throws); the test process fails on it (test/support/pg-overlap.ts).
    it('run statements asked for at once inside one transaction one after another, and a failing one ends only its transaction', async () => {
      const db = await fixture.freshDatabase();
      const at = new Date().toISOString();
      const answers = await db.transaction((tx) =>
        Promise.all(Array.from({ length: 6 }, (_, i) => tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [
          `20000000-0000-4000-8000-${String(i).padStart(12, '0')}`, `at-once-${i}`, 'x', at,
        ]))),
      );
      assert.deepEqual(answers, [1, 1, 1, 1, 1, 1]);
      // A duplicate among statements in flight: the transaction rolls back whole, the next one runs.
      await assert.rejects(db.transaction((tx) =>
        Promise.all(['at-once-0', 'other-1', 'other-2', 'other-3'].map((code, i) => tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [
          `30000000-0000-4000-8000-${String(i).padStart(12, '0')}`, code, 'x', at,
        ]))),
      ));
      assert.equal(await count(db, 'entitlements'), 6);
      assert.deepEqual(await db.transaction((tx) => Promise.all([tx.query('SELECT 1 AS n'), tx.query('SELECT 2 AS n'), tx.query('SELECT 3 AS n')])), [[{ n: 1 }], [{ n: 2 }], [{ n: 3 }]]);
    });

    it('keep concurrent work of one process apart', async () => {
      const db = await fixture.freshDatabase();
      await Promise.all(Array.from({ length: 20 }, (_, i) => createCustomer(db, { name: `Customer ${i}` }, context)));
      assert.equal(await count(db, 'customers'), 20);
      assert.equal(await count(db, 'audit_log'), 20);
    });
  });
});
