import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createAdminToken, listAdminTokensPage } from '../../src/lib/admin-tokens.js';
import { listAuditPage, type AuditEntry } from '../../src/lib/audit.js';
import { listCustomersPage } from '../../src/lib/customers.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import { listEntitlementsPage } from '../../src/lib/licensing/entitlements.js';
import { listLicensesPage, type License } from '../../src/lib/licensing/licenses.js';
import { listMachinesPage } from '../../src/lib/licensing/machines.js';
import { listUsageRecordsPage } from '../../src/lib/licensing/usage-view.js';
import { MAX_LIST_OFFSET, type ListPage } from '../../src/lib/paging.js';
import type { Database, SqlValue } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';

/**
 * Cursor paging over the real lists on both engines: every row exactly once and in order,
 * also while rows are added between pages; ties on the sort key broken by id; cursors bound
 * to their list and filters; the offset cap.
 */

const base = Date.parse('2026-03-01T00:00:00.000Z');
// Three rows share each timestamp, so that the id has to break ties.
const tied = (i: number) => new Date(base + Math.floor(i / 3) * 60_000).toISOString();

async function rejectsWith(promise: Promise<unknown>, pattern: RegExp): Promise<LicenseServerError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof LicenseServerError, String(error));
    assert.equal(error.code, 'INVALID_INPUT', error.message);
    assert.match(error.message, pattern);
    return error;
  }
  assert.fail('expected INVALID_INPUT');
}

/** Follows next_cursor to the end, calling `between` after each page. */
async function walk<T>(fetch: (cursor?: string) => Promise<ListPage<T>>, between: () => Promise<void> = async () => undefined): Promise<T[]> {
  const seen: T[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages += 1) {
    const page = await fetch(cursor);
    seen.push(...page.items);
    if (page.next_cursor === null) return seen;
    cursor = page.next_cursor;
    await between();
  }
  assert.fail('paging did not end');
}

const byKeys = (keys: (row: any) => string[], descending = false) => (a: unknown, b: unknown) => {
  const [x, y] = [keys(a), keys(b)];
  for (let i = 0; i < x.length; i += 1) if (x[i] !== y[i]) return (x[i]! < y[i]! ? -1 : 1) * (descending ? -1 : 1);
  return 0;
};

async function insert(db: Database, table: string, row: Record<string, SqlValue>): Promise<void> {
  const columns = Object.keys(row);
  await db.execute(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, Object.values(row));
}

forEachEngine('cursor paging', (fixture) => {
  let db: Database;
  const customers: string[] = [];
  const licenses: string[] = [];
  const entitlementId = randomUUID();
  let added = 0;

  const addLicense = async (customerId: string, createdAt: string) => {
    const id = randomUUID();
    await insert(db, 'licenses', {
      id, license_key: `KEY-${id}`, customer_id: customerId, type: 'time_based', active: true,
      valid_from: '2026-01-01T00:00:00.000Z', valid_until: '2099-01-01T00:00:00.000Z', created_at: createdAt, updated_at: createdAt,
    });
    return id;
  };

  before(async () => {
    db = await fixture.freshDatabase();
    for (let i = 0; i < 9; i += 1) {
      const id = randomUUID();
      customers.push(id);
      await insert(db, 'customers', { id, name: `c${i}`, active: i % 4 !== 0, created_at: tied(i), updated_at: tied(i) });
    }
    await insert(db, 'entitlements', { id: entitlementId, code: 'seats', name: 'Seats', created_at: tied(0) });
    for (let i = 0; i < 23; i += 1) licenses.push(await addLicense(customers[i % 2]!, tied(i)));
    for (let i = 0; i < 23; i += 1) {
      await insert(db, 'machines', {
        id: randomUUID(), license_id: licenses[i % 3]!, hardware_id: `hw-${i}`, active: i % 3 !== 0, first_seen: tied(i), last_seen: tied(i),
        lease_expires_at: null, offline_until: null,
      });
      await insert(db, 'audit_log', { occurred_at: tied(i), actor: 'cli:t', action: i % 2 ? 'a.odd' : 'a.even', entity_type: 'license', entity_id: licenses[i % 3]!, details: '{}' });
      await insert(db, 'usage_records', {
        id: randomUUID(), license_id: licenses[0]!, entitlement_id: entitlementId, idempotency_key: `k${i}`, hardware_id: 'hw', quantity: 1,
        occurred_at: tied(i), recorded_at: tied(i),
      });
    }
  });

  it('licenses: every page by cursor gives every license once, oldest first, also while licenses are added', async () => {
    const before = (await listLicensesPage(db, { limit: 1000 })).items;
    const expected = [...before].sort(byKeys((l: License) => [l.created_at, l.id])).map((l) => l.id);
    assert.deepEqual(before.map((l) => l.id), expected);
    const newIds: string[] = [];
    const walked = await walk(
      (cursor) => listLicensesPage(db, { limit: 4, ...(cursor ? { cursor } : {}) }),
      async () => { newIds.push(await addLicense(customers[0]!, new Date(base + 86_400_000 + (added += 1) * 1000).toISOString())); },
    );
    const ids = walked.map((l) => l.id);
    assert.equal(new Set(ids).size, ids.length, 'no license twice');
    assert.deepEqual(ids.slice(0, expected.length), expected, 'the licenses there before, in order');
    assert.deepEqual(ids.slice(expected.length), newIds.slice(0, ids.length - expected.length), 'licenses added later come after, in order');
    // Filtered by customer: the cursor walks that customer's index.
    const mine = await walk((cursor) => listLicensesPage(db, { customerId: customers[1]!, limit: 3, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(mine.map((l) => l.id), walked.filter((l) => l.customer_id === customers[1]).map((l) => l.id));
  });

  it('customers, machines, usage records and entitlements: every row once, in the list order', async () => {
    const customersWalked = await walk((cursor) => listCustomersPage(db, { limit: 2, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(customersWalked.map((c) => c.id), [...customersWalked].sort(byKeys((c) => [c.created_at, c.id])).map((c) => c.id));
    assert.equal(customersWalked.length, customers.length);
    const inactive = await walk((cursor) => listCustomersPage(db, { active: false, limit: 1, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(inactive.map((c) => c.id), customersWalked.filter((c) => !c.active).map((c) => c.id));

    const machines = await walk((cursor) => listMachinesPage(db, { limit: 5, ...(cursor ? { cursor } : {}) }));
    assert.equal(machines.length, 23);
    assert.deepEqual(machines.map((m) => m.id), [...machines].sort(byKeys((m) => [m.first_seen, m.id])).map((m) => m.id));
    // An inactive machine with no lease and no offline file holds no seat, and is listed so.
    const free = await walk((cursor) => listMachinesPage(db, { holdingSeat: false, limit: 2, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(free.map((m) => m.id), machines.filter((m) => !m.active).map((m) => m.id));
    assert.ok(free.length > 0);

    const usage = await walk((cursor) => listUsageRecordsPage(db, licenses[0]!, { limit: 4, ...(cursor ? { cursor } : {}) }));
    assert.equal(usage.length, 23);
    assert.deepEqual(usage.map((u) => u.id), [...usage].sort(byKeys((u) => [u.recorded_at, u.id], true)).map((u) => u.id));

    for (const code of ['alpha', 'beta', 'gamma']) await insert(db, 'entitlements', { id: randomUUID(), code, name: code, created_at: tied(0) });
    const entitlements = await walk((cursor) => listEntitlementsPage(db, { limit: 1, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(entitlements.map((e) => e.code), ['alpha', 'beta', 'gamma', 'seats']);
  });

  it('audit: newest first by occurred_at then id, every entry once while entries are added', async () => {
    const all = (await listAuditPage(db, { limit: 1000 })).items;
    const expected = [...all].sort(byKeys((e: AuditEntry) => [e.occurred_at, String(e.id).padStart(12, '0')], true)).map((e) => e.id);
    assert.deepEqual(all.map((e) => e.id), expected);
    const walked = await walk(
      (cursor) => listAuditPage(db, { limit: 4, ...(cursor ? { cursor } : {}) }),
      // Newer than every page already read: they belong before the cursor, never after it.
      () => insert(db, 'audit_log', { occurred_at: new Date(base + 9 * 86_400_000).toISOString(), actor: 'cli:t', action: 'a.new', entity_type: 'license', entity_id: null, details: '{}' }),
    );
    assert.deepEqual(walked.map((e) => e.id), expected);
    const since = new Date(tied(6));
    const filtered = await walk((cursor) => listAuditPage(db, { action: 'a.odd', since, limit: 2, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(filtered.map((e) => e.id), all.filter((e) => e.action === 'a.odd' && e.occurred_at >= since.toISOString()).map((e) => e.id));
  });

  it('admin tokens: pages by cursor, oldest first', async () => {
    for (let i = 0; i < 5; i += 1) await createAdminToken(db, { name: `t${i}` }, { actor: 'cli:t' });
    const walked = await walk((cursor) => listAdminTokensPage(db, { limit: 2, ...(cursor ? { cursor } : {}) }));
    assert.deepEqual(walked.map((t) => t.name).sort(), ['t0', 't1', 't2', 't3', 't4']);
    assert.deepEqual(walked.map((t) => t.id), [...walked].sort(byKeys((t) => [t.created_at, t.id])).map((t) => t.id));
  });

  it('refuse a cursor of another list, of other filters, or that is not a cursor (INVALID_INPUT)', async () => {
    const licensePage = await listLicensesPage(db, { limit: 1 });
    const cursor = licensePage.next_cursor!;
    await rejectsWith(listCustomersPage(db, { cursor }), /belongs to another list \(licenses\), not to customers/);
    await rejectsWith(listLicensesPage(db, { customerId: customers[0]!, cursor }), /was made with other filters/);
    await rejectsWith(listLicensesPage(db, { active: true, cursor }), /was made with other filters/);
    // The limit may change between pages.
    assert.equal((await listLicensesPage(db, { limit: 7, cursor })).items.length, 7);
    const garbage = 'not-a-cursor-and-quite-a-long-secret-looking-string';
    const error = await rejectsWith(listLicensesPage(db, { cursor: garbage }), /is not a cursor this server made/);
    assert.ok(!error.message.includes(garbage), 'never echoes the whole cursor');
    await rejectsWith(listLicensesPage(db, { cursor: 'a b' }), /is not a cursor/);
    // Well-formed JSON in base64url, but a key value of the wrong kind: refused before SQL.
    const forged = Buffer.from(JSON.stringify([1, 'licenses', JSON.parse(Buffer.from(cursor, 'base64url').toString())[2], "'; DROP TABLE licenses; --", 'x'])).toString('base64url');
    await rejectsWith(listLicensesPage(db, { cursor: forged }), /is not a cursor this server made/);
  });

  it('cap offset at MAX_LIST_OFFSET and refuse an offset with a cursor (INVALID_INPUT)', async () => {
    assert.equal((await listLicensesPage(db, { offset: MAX_LIST_OFFSET })).items.length, 0);
    await rejectsWith(listLicensesPage(db, { offset: MAX_LIST_OFFSET + 1 }), /offset may be at most 10000.*cursor/);
    await rejectsWith(listAuditPage(db, { offset: MAX_LIST_OFFSET + 1 }), /offset may be at most/);
    const { next_cursor } = await listLicensesPage(db, { limit: 1 });
    await rejectsWith(listLicensesPage(db, { offset: 0, cursor: next_cursor! }), /either a cursor or an offset, not both/);
    // An offset page still says where the next page starts.
    const offsetPage = await listLicensesPage(db, { offset: 2, limit: 2 });
    const next = await listLicensesPage(db, { limit: 2, cursor: offsetPage.next_cursor! });
    assert.deepEqual(next.items.map((l) => l.id), (await listLicensesPage(db, { offset: 4, limit: 2 })).items.map((l) => l.id));
  });
});
