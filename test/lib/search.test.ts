import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createAdminToken } from '../../src/lib/admin-tokens.js';
import { appendAudit } from '../../src/lib/audit.js';
import type { OperationContext } from '../../src/lib/context.js';
import { createCustomer, updateCustomer } from '../../src/lib/customers.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import { createEntitlement } from '../../src/lib/licensing/entitlements.js';
import { createLicense, type License } from '../../src/lib/licensing/licenses.js';
import { keyQuery, prefixRange } from '../../src/lib/search/ranges.js';
import { search, SEARCH_KINDS, type SearchResults } from '../../src/lib/search/search.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';
import { ADMIN_URL, createTestDatabase, dropTestDatabase, onDatabase, requirePostgres } from '../support/postgres.js';

const operator: OperationContext = { actor: 'cli:operator' };
const future = new Date(Date.now() + 365 * 24 * 3_600_000).toISOString();

async function refused(promise: Promise<unknown>, code: string): Promise<void> {
  await assert.rejects(promise, (error: unknown) => {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, code, error.message);
    return true;
  });
}

const ids = (group: { items: ReadonlyArray<{ id: string | number }> } | undefined) => (group?.items ?? []).map((item) => item.id).sort();

describe('search ranges', () => {
  it('reads a key prefix loosely and puts the dashes back where the stored key has them', () => {
    assert.deepEqual(keyQuery('7kq2m9'), { range: { from: '7KQ2-M9', to: '7KQ2-MA' }, symbols: 6 });
    assert.deepEqual(keyQuery('7KQ2-M9'), keyQuery('7 k q 2 m 9'));
    // Look-alikes: O is 0, I and L are 1.
    assert.deepEqual(keyQuery('oil'), { range: { from: '011', to: '012' }, symbols: 3 });
    // Z is the last symbol: the end carries into the one before.
    assert.deepEqual(keyQuery('ABZZ'), { range: { from: 'ABZZ', to: 'AC' }, symbols: 4 });
    assert.deepEqual(keyQuery('ZZ'), { range: { from: 'ZZ', to: undefined }, symbols: 2 });
    assert.deepEqual(keyQuery('ABCD9'), { range: { from: 'ABCD-9', to: 'ABCD-A' }, symbols: 5 });
    assert.deepEqual(keyQuery('a'.repeat(28)), { whole: Array(7).fill('AAAA').join('-') });
    assert.deepEqual(keyQuery('7KQ2M9XD1R', 7), { range: { from: '7KQ2-M9X', to: '7KQ2-M9Y' }, symbols: 7 });
    for (const notKey of ['u', 'a%', 'ab_c', '', 'A'.repeat(29), "o'brien"]) assert.equal(keyQuery(notKey), undefined, notKey);
  });

  it('raises the last code point of a text prefix, skipping what UTF-8 cannot hold', () => {
    assert.deepEqual(prefixRange('ab'), { from: 'ab', to: 'ac' });
    assert.deepEqual(prefixRange('a\ud7ff'), { from: 'a\ud7ff', to: 'a\ue000' });
    assert.deepEqual(prefixRange('a\u{10ffff}'), { from: 'a\u{10ffff}', to: 'b' });
    assert.deepEqual(prefixRange('\u{10ffff}'), { from: '\u{10ffff}', to: undefined });
  });
});

forEachEngine('search', (fixture) => {
  let db: Database;
  let acme: string;
  let globex: string;
  let hostile: string;
  let licenses: License[];
  let machineId: string;
  let entitlementId: string;

  before(async () => {
    db = await fixture.freshDatabase();
    acme = (await createCustomer(db, { name: 'Acme Corporation', email: 'billing@acme-rockets.example' }, operator)).id;
    globex = (await createCustomer(db, { name: 'Globex GmbH', email: 'Procurement@Globex.example' }, operator)).id;
    hostile = (await createCustomer(db, { name: `100% "Quoted" O'Brien_\\Co`, email: null }, operator)).id;
    for (let i = 0; i < 13; i += 1) await createCustomer(db, { name: `Many Widgets ${i}`, email: `shop${i}@widgets.example` }, operator);
    entitlementId = (await createEntitlement(db, { code: 'export-pdf', name: 'Export to PDF' }, operator)).id;
    licenses = [];
    for (const customerId of [acme, acme, globex]) {
      licenses.push(await createLicense(db, { customerId, type: 'time_based', validUntil: future, entitlements: [{ code: 'export-pdf', usageLimit: null }] }, operator));
    }
    machineId = randomUUID();
    const at = new Date().toISOString();
    await db.execute(
      `INSERT INTO machines (id, license_id, hardware_id, name, active, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)`,
      [machineId, licenses[0]!.id, 'hw2-0a1b2c3d4e5f', 'Build-Server-7', true, at, at,
        randomUUID(), licenses[1]!.id, 'hw2-ffee', 'laptop of Ana', false, at, at],
    );
  });

  it('finds a license by its whole key and by any prefix, with or without dashes, in any case', async () => {
    const license = licenses[2]!;
    const whole = await search(db, license.key.toLowerCase().replace(/-/g, ' '));
    assert.deepEqual(whole.licenses?.items.map((item) => [item.id, item.matched]), [[license.id, 'key']]);
    const item = whole.licenses!.items[0]!;
    assert.deepEqual(
      { key: item.key, key_prefix: item.key_prefix, customer_id: item.customer_id, customer_name: item.customer_name, type: item.type, active: item.active, valid_until: item.valid_until },
      { key: license.key, key_prefix: license.key_prefix, customer_id: globex, customer_name: 'Globex GmbH', type: 'time_based', active: true, valid_until: license.valid_until },
    );
    for (const typed of [license.key.slice(0, 12), license.key.slice(0, 12).replace(/-/g, ''), license.key.slice(0, 9).toLowerCase(), license.key.slice(0, 6)]) {
      const found = await search(db, typed, { kinds: ['licenses'] });
      assert.ok(found.licenses!.items.some((match) => match.id === license.id && match.matched === 'key_prefix'), typed);
      for (const match of found.licenses!.items) {
        assert.ok(match.key.replace(/-/g, '').startsWith(typed.toUpperCase().replace(/-/g, '')), `${match.key} starts with ${typed}`);
      }
    }
    // One symbol off at the end: not this license.
    const last = license.key.slice(0, 13);
    const other = last.slice(0, -1) + (last.endsWith('Z') ? 'Y' : 'Z');
    assert.ok(!(await search(db, other, { kinds: ['licenses'] })).licenses!.items.some((match) => match.id === license.id));
  });

  it('matches a key prefix only as far as keyPrefixSymbols says', async () => {
    const license = licenses[0]!;
    // Seven symbols right, then a wrong one: matched, since only the seven are looked at.
    const wrongAfterPrefix = `${license.key.slice(0, 8)}${license.key[8] === 'Z' ? 'Y' : 'Z'}`;
    const cut = await search(db, wrongAfterPrefix, { kinds: ['licenses'], keyPrefixSymbols: 7 });
    assert.ok(cut.licenses!.items.some((match) => match.id === license.id));
    const full = await search(db, wrongAfterPrefix, { kinds: ['licenses'] });
    assert.ok(!full.licenses!.items.some((match) => match.id === license.id));
  });

  it('finds a customer by a substring in the middle of a name or an email, whatever the case', async () => {
    const byName = await search(db, 'ME CORPOR');
    assert.deepEqual(byName.customers?.items.map((item) => [item.id, item.matched]), [[acme, 'name']]);
    assert.deepEqual(byName.customers!.items[0], { id: acme, name: 'Acme Corporation', email: 'billing@acme-rockets.example', active: true, matched: 'name' });
    const byEmail = await search(db, 'ROCKETS.EX');
    assert.deepEqual(byEmail.customers?.items.map((item) => [item.id, item.matched]), [[acme, 'email']]);
    assert.deepEqual(ids((await search(db, 'curement@glo')).customers), [globex]);
  });

  it('finds a customer by the start of a name or email when the query is shorter than 3 characters', async () => {
    assert.deepEqual(ids((await search(db, 'gL')).customers), [globex]);
    assert.deepEqual(ids((await search(db, 'pr')).customers), [globex]);
    // Not in the middle: "me" is inside "Acme" only.
    assert.deepEqual(ids((await search(db, 'me')).customers), []);
  });

  it('follows a customer whose name or email changes', async () => {
    const customer = await createCustomer(db, { name: 'Initech', email: 'it@initech.example' }, operator);
    await updateCustomer(db, customer.id, { name: 'Intertrode', email: 'ops@intertrode.example' }, operator);
    assert.deepEqual(ids((await search(db, 'initech')).customers), []);
    assert.deepEqual(ids((await search(db, 'ertrod')).customers), [customer.id]);
    assert.deepEqual(ids((await search(db, 'ops@inter')).customers), [customer.id]);
  });

  it('finds a machine by its hardware ID, whole or a prefix, or by the start of its name', async () => {
    assert.deepEqual((await search(db, 'hw2-0a1b2c3d4e5f')).machines?.items.map((item) => [item.id, item.matched]), [[machineId, 'hardware_id']]);
    assert.deepEqual(ids((await search(db, 'hw2-0a1')).machines), [machineId]);
    assert.equal((await search(db, 'hw2-')).machines?.items.length, 2);
    const byName = await search(db, 'build-ser');
    assert.deepEqual(byName.machines?.items, [{ id: machineId, hardware_id: 'hw2-0a1b2c3d4e5f', name: 'Build-Server-7', license_id: licenses[0]!.id, active: true, matched: 'name' }]);
  });

  it('finds every kind of record by its id', async () => {
    const token = await createAdminToken(db, { name: 'search-test', scopes: ['read'] }, operator);
    const deliveryId = randomUUID();
    const at = new Date().toISOString();
    await db.execute(
      `INSERT INTO notification_deliveries (id, event_id, event, occurred_at, data, channel, target, status, next_attempt_at, retry_from, created_at)
       VALUES (?, ?, 'license.created', ?, '{}', 'webhook', 'ops', 'pending', ?, ?, ?)`,
      [deliveryId, randomUUID(), at, at, at, at],
    );
    const expect: Array<[string, keyof SearchResults]> = [
      [licenses[1]!.id, 'licenses'], [acme, 'customers'], [machineId, 'machines'], [entitlementId, 'entitlements'],
      [token.record.id, 'admin_tokens'], [deliveryId, 'notification_deliveries'],
    ];
    for (const [id, kind] of expect) {
      const found = await search(db, id.toUpperCase());
      for (const other of SEARCH_KINDS) {
        const group = found[other] as { items: Array<{ id: unknown; matched: string }> };
        if (other === kind) assert.deepEqual(group.items.map((item) => [item.id, item.matched]), [[id, 'id']], `${kind} by id`);
        // The audit log holds entries about the record: found by entity id, never as the record.
        else if (other === 'audit_entries') assert.ok(group.items.every((item) => item.matched === 'entity_id'));
        else assert.deepEqual(group.items, [], `${other} for a ${kind} id`);
      }
    }
    assert.deepEqual((await search(db, token.record.id)).admin_tokens?.items, [
      { id: token.record.id, name: 'search-test', scopes: ['read'], expires_at: null, revoked: false, matched: 'id' },
    ]);
  });

  it('finds audit entries by their number and by the id of what they are about, newest first', async () => {
    await appendAudit(db, operator, { action: 'customer.noted', entityType: 'customer', entityId: globex, details: {} });
    const about = await search(db, globex, { kinds: ['audit_entries'] });
    assert.deepEqual(about.audit_entries!.items.map((item) => item.action), ['customer.noted', 'customer.created']);
    const number = about.audit_entries!.items[0]!.id;
    const byNumber = await search(db, String(number), { kinds: ['audit_entries'] });
    assert.deepEqual(byNumber.audit_entries!.items.map((item) => [item.id, item.matched, item.entity_id]), [[number, 'id', globex]]);
  });

  it('finds an entitlement by its code or a prefix of it', async () => {
    assert.deepEqual((await search(db, 'export-')).entitlements?.items, [{ id: entitlementId, code: 'export-pdf', name: 'Export to PDF', matched: 'code' }]);
  });

  it('gives at most `limit` items per group and says when there are more', async () => {
    const ten = await search(db, 'widgets');
    assert.equal(ten.customers!.items.length, 10);
    assert.equal(ten.customers!.more, true);
    const five = await search(db, 'widgets', { limit: 5 });
    assert.deepEqual([five.customers!.items.length, five.customers!.more], [5, true]);
    const all = await search(db, 'widgets', { limit: 50 });
    assert.deepEqual([all.customers!.items.length, all.customers!.more], [13, false]);
    assert.equal(new Set(ids(all.customers)).size, 13);
    const exact = await search(db, 'widgets', { limit: 13 });
    assert.deepEqual([exact.customers!.items.length, exact.customers!.more], [13, false]);
    const one = await search(db, licenses[0]!.key.slice(0, 1), { kinds: ['licenses'], limit: 1 });
    assert.equal(one.licenses!.items.length, 1);
    for (const limit of [0, 51, 1.5, -1]) await refused(search(db, 'widgets', { limit }), 'INVALID_INPUT');
  });

  it('answers a query that matches nothing with empty groups, each present', async () => {
    const found = await search(db, 'no such thing anywhere');
    assert.deepEqual(Object.keys(found).sort(), ['query', ...SEARCH_KINDS].sort());
    for (const kind of SEARCH_KINDS) assert.deepEqual(found[kind], { items: [], more: false });
    assert.deepEqual(Object.keys(await search(db, 'x', { kinds: ['machines'] })).sort(), ['machines', 'query']);
  });

  it('takes %, _, quotes and backslashes literally', async () => {
    for (const typed of ['100%', '0% "q', `'brien_\\c`, '"quoted"', '\\co']) {
      assert.deepEqual(ids((await search(db, typed)).customers), [hostile], typed);
    }
    for (const typed of ['%', '_', '%%%', '___', '\\', '\\\\\\', '"', '"""', "'", "''", '*', 'a*', '^acme', 'name:acme', '{name}: acme', 'NEAR(a b)', 'a OR b', '% OR 1=1 --']) {
      const found = await search(db, typed);
      const names = (found.customers?.items ?? []).map((item) => item.name);
      const needle = typed.toLowerCase();
      for (const name of names) {
        const email = found.customers!.items.find((item) => item.name === name)!.email ?? '';
        const fits = typed.length >= 3 ? (name.toLowerCase().includes(needle) || email.toLowerCase().includes(needle)) : (name.toLowerCase().startsWith(needle) || email.toLowerCase().startsWith(needle));
        assert.ok(fits, `${JSON.stringify(typed)} found ${name}`);
      }
      if (typed === '%' || typed === '%%%' || typed === '_' || typed === '___') assert.equal(names.length, 0, typed);
    }
    assert.deepEqual(ids((await search(db, '"Quoted" O')).customers), [hostile]);
  });

  it('refuses an empty, blank, too long or unprintable query', async () => {
    for (const q of ['', '   ', 'a'.repeat(201), 'a\u0000b', 'tab\there', '\ud800x']) await refused(search(db, q), 'INVALID_INPUT');
    assert.equal((await search(db, `  ${'a'.repeat(200)}  `)).query, 'a'.repeat(200));
  });
});

describe('search on PostgreSQL without pg_trgm', () => {
  const role = `ls_search_${process.pid}`;
  let url: string;
  before(async function () {
    await requirePostgres(this);
    url = await createTestDatabase();
    await onDatabase(ADMIN_URL, (client) => client.query(`CREATE ROLE ${role} LOGIN`));
    // The role may use a schema of its own but not CREATE on the database: no extension for it.
    await onDatabase(url, async (client) => {
      await client.query(`CREATE SCHEMA app AUTHORIZATION ${role}`);
      await client.query(`ALTER ROLE ${role} IN DATABASE ${new URL(url).pathname.slice(1)} SET search_path = app`);
    });
  });
  after(async () => {
    if (url) await dropTestDatabase(url);
    await onDatabase(ADMIN_URL, (client) => client.query(`DROP ROLE IF EXISTS ${role}`)).catch(() => undefined);
  });

  it('migrates without the trigram indexes and finds substrings all the same', async () => {
    const asRole = new URL(url);
    asRole.username = role;
    const db = await openDatabase(asRole.toString());
    try {
      assert.deepEqual(await db.query("SELECT extname FROM pg_extension WHERE extname = 'pg_trgm'"), []);
      assert.deepEqual(await db.query("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%_trigrams'"), []);
      const customer = await createCustomer(db, { name: 'Acme Corp', email: 'billing@acme.example' }, operator);
      assert.deepEqual(ids((await search(db, 'me co')).customers), [customer.id]);
      assert.deepEqual(ids((await search(db, 'LING@AC')).customers), [customer.id]);
    } finally {
      await db.close();
    }
  });
});
