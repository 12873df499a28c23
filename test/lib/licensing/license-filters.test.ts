import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { ATTENTION_LISTS, countAttentionLists } from '../../../src/lib/attention-counts.js';
import { countAudit } from '../../../src/lib/audit.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import type { LicenseConditions } from '../../../src/lib/licensing/license-filters.js';
import { EXPIRING_WITHIN_MS, LICENSE_STATUSES, licenseStatus, type LicenseStatus } from '../../../src/lib/licensing/license-status.js';
import { countLicenses, getLicense, listLicensesPage, type License } from '../../../src/lib/licensing/licenses.js';
import { countMachines, listMachinesPage, type Machine, type MachineConditions } from '../../../src/lib/licensing/machines.js';
import { countDeliveries, listDeliveriesPage } from '../../../src/lib/notifications/deliveries.js';
import type { ListPage } from '../../../src/lib/paging.js';
import type { Database, SqlValue } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

/**
 * The list filters of issue 36 on both engines, at the boundaries of time: a license's status
 * and the status filter agree at every instant around each edge (ending exactly at now + 7 d,
 * one second after, starting one second from now...), every filter selects exactly the rows
 * its rule says, paging by cursor through a filtered list gives each row once, and a count
 * says as many as the list holds.
 */

const SECOND = 1000;
const DAY = 86_400_000;
const NOW = Date.parse('2026-03-01T00:00:00.000Z');
const iso = (ms: number) => new Date(ms).toISOString();

async function insert(db: Database, table: string, row: Record<string, SqlValue>): Promise<void> {
  const columns = Object.keys(row);
  await db.execute(`INSERT INTO ${table} (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`, Object.values(row));
}

/** Every row of a filtered list, following cursors with small pages. */
async function walk<T>(fetch: (cursor?: string) => Promise<ListPage<T>>): Promise<T[]> {
  const seen: T[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 1000; pages += 1) {
    const page = await fetch(cursor);
    seen.push(...page.items);
    if (page.next_cursor === null) return seen;
    cursor = page.next_cursor;
  }
  assert.fail('paging did not end');
}

forEachEngine('license list filters', (fixture) => {
  let db: Database;
  const named = new Map<string, string>();
  const id = (name: string) => named.get(name)!;
  const customer = { on: randomUUID(), off: randomUUID() };
  const entitlement = { seats: randomUUID(), api: randomUUID() };
  let created = 0;

  interface Spec {
    from?: number;
    until: number;
    active?: boolean;
    customerOff?: boolean;
    type?: string;
    maxMachines?: number;
    floating?: boolean;
  }

  const license = async (name: string, spec: Spec) => {
    const licenseId = randomUUID();
    named.set(name, licenseId);
    const at = iso(NOW - 30 * DAY + (created += 1) * SECOND);
    await insert(db, 'licenses', {
      id: licenseId, license_key: `KEY-${licenseId}`, customer_id: spec.customerOff ? customer.off : customer.on, type: spec.type ?? 'time_based',
      active: spec.active ?? true, valid_from: iso(spec.from ?? NOW - 60 * DAY), valid_until: iso(spec.until), max_machines: spec.maxMachines ?? null,
      floating: spec.floating ?? false, lease_hours: 1, created_at: at, updated_at: at,
    });
  };

  const machine = async (licenseName: string, row: { active?: boolean; lease?: number; offline?: number; lastSeen?: number; hardwareId?: string }) => {
    const machineId = randomUUID();
    await insert(db, 'machines', {
      id: machineId, license_id: id(licenseName), hardware_id: row.hardwareId ?? `hw-${machineId}`, active: row.active ?? true,
      first_seen: iso(NOW - 20 * DAY + (created += 1) * SECOND), last_seen: iso(row.lastSeen ?? NOW - 20 * DAY),
      lease_expires_at: row.lease === undefined ? null : iso(row.lease), offline_until: row.offline === undefined ? null : iso(row.offline),
    });
    return machineId;
  };

  const grant = (licenseName: string, entitlementId: string, limit: number | null, used: number) =>
    insert(db, 'license_entitlements', { license_id: id(licenseName), entitlement_id: entitlementId, usage_limit: limit, used });

  /** Every license the filter selects at `at`, walked two at a time. */
  const select = async (conditions: LicenseConditions, at: number = NOW): Promise<License[]> =>
    walk((cursor) => listLicensesPage(db, { ...conditions, limit: 2, ...(cursor ? { cursor } : {}) }, new Date(at)));

  const names = (licenses: readonly License[]) => licenses.map((l) => [...named].find(([, v]) => v === l.id)?.[0] ?? l.id).sort();

  before(async () => {
    db = await fixture.freshDatabase();
    await insert(db, 'customers', { id: customer.on, name: 'On', active: true, created_at: iso(NOW - 90 * DAY), updated_at: iso(NOW - 90 * DAY) });
    await insert(db, 'customers', { id: customer.off, name: 'Off', active: false, created_at: iso(NOW - 90 * DAY), updated_at: iso(NOW - 90 * DAY) });
    await insert(db, 'entitlements', { id: entitlement.seats, code: 'seats', name: 'Seats', created_at: iso(NOW - 90 * DAY) });
    await insert(db, 'entitlements', { id: entitlement.api, code: 'api-calls', name: 'API calls', created_at: iso(NOW - 90 * DAY) });
    await license('ends-at-7d', { until: NOW + 7 * DAY });
    await license('ends-7d-and-1s', { until: NOW + 7 * DAY + SECOND });
    await license('ends-now', { until: NOW });
    await license('ended-7d-ago', { until: NOW - 7 * DAY });
    await license('ended-7d-less-1s-ago', { until: NOW - 7 * DAY + SECOND });
    await license('starts-in-1s', { from: NOW + SECOND, until: NOW + 30 * DAY });
    await license('starts-now', { from: NOW, until: NOW + 30 * DAY, type: 'hybrid' });
    await license('ends-at-30d', { until: NOW + 30 * DAY, type: 'usage_based' });
    await license('deactivated', { until: NOW + DAY, active: false });
    await license('customer-off', { until: NOW - DAY, customerOff: true });
    await license('full-node-locked', { until: NOW + 365 * DAY, maxMachines: 2 });
    await license('one-of-two', { until: NOW + 365 * DAY, maxMachines: 2 });
    await license('floating-lease', { until: NOW + 365 * DAY, maxMachines: 1, floating: true });
    await license('full-deactivated', { until: NOW + 365 * DAY, maxMachines: 1, active: false });
    await machine('full-node-locked', { lastSeen: NOW - 3 * DAY, hardwareId: 'hw-shared' });
    await machine('full-node-locked', { lastSeen: NOW - DAY });
    await machine('one-of-two', { lastSeen: NOW });
    // Deactivated but an offline file still holds the seat until now + 1 s.
    await machine('one-of-two', { active: false, lastSeen: NOW - 40 * DAY, hardwareId: 'hw-shared' });
    await machine('floating-lease', { lease: NOW + SECOND, lastSeen: NOW - 10 * DAY });
    await machine('full-deactivated', {});
    await grant('ends-at-30d', entitlement.api, 10, 8);
    await grant('ends-at-30d', entitlement.seats, null, 50);
    await grant('starts-now', entitlement.api, 10, 7);
    await grant('deactivated', entitlement.api, 5, 5);
    await grant('one-of-two', entitlement.seats, 3, 0);
  });

  it('a license status and the status filter agree at every instant around each edge', async () => {
    const expected: Record<string, LicenseStatus> = {
      'ends-at-7d': 'expiring', 'ends-7d-and-1s': 'active', 'ends-now': 'expired', 'ended-7d-ago': 'expired', 'ended-7d-less-1s-ago': 'expired',
      'starts-in-1s': 'pending', 'starts-now': 'active', 'ends-at-30d': 'active', deactivated: 'suspended', 'customer-off': 'suspended',
    };
    const all = await select({});
    const byName = new Map(all.map((l) => [names([l])[0]!, l]));
    for (const [name, status] of Object.entries(expected)) assert.equal(byName.get(name)!.status, status, name);
    // One second before the edges, at them and one second after: the record and the filter say the same.
    for (const at of [NOW - SECOND, NOW, NOW + SECOND, NOW + 23 * DAY, NOW + 23 * DAY + SECOND]) {
      const listed = await select({}, at);
      for (const status of LICENSE_STATUSES) {
        const filtered = await select({ status }, at);
        assert.deepEqual(names(filtered), names(listed.filter((l) => l.status === status)), `${status} at ${iso(at)}`);
        assert.ok(filtered.every((l) => licenseStatus(l, new Date(at)) === status));
      }
    }
    assert.equal(EXPIRING_WITHIN_MS, 7 * DAY);
    // getLicense computes it at the time it is asked for.
    assert.equal((await getLicense(db, id('ends-7d-and-1s'), { at: new Date(NOW + SECOND) })).status, 'expiring');
  });

  it('within widens expiring, and picks the recently expired', async () => {
    assert.deepEqual(names(await select({ status: 'expiring' })), ['ends-at-7d']);
    assert.deepEqual(names(await select({ status: 'expiring', withinMs: 7 * DAY + SECOND })), ['ends-7d-and-1s', 'ends-at-7d']);
    // Expiring counts only licenses valid already: starts-in-1s is pending until now + 1 s.
    assert.deepEqual(names(await select({ status: 'expiring', withinMs: 30 * DAY })), ['ends-7d-and-1s', 'ends-at-30d', 'ends-at-7d', 'starts-now']);
    assert.deepEqual(names(await select({ status: 'expiring', withinMs: 30 * DAY }, NOW + SECOND)), ['ends-7d-and-1s', 'ends-at-30d', 'ends-at-7d', 'starts-in-1s', 'starts-now']);
    // Ended within the last 7 days: after now - 7 d, up to now.
    assert.deepEqual(names(await select({ status: 'expired', withinMs: 7 * DAY })), ['ended-7d-less-1s-ago', 'ends-now']);
    // One second on, the one that ended 7 days less 1 s before now has ended 7 days ago: out.
    assert.deepEqual(names(await select({ status: 'expired', withinMs: 7 * DAY }, NOW + SECOND)), ['ends-now']);
    assert.deepEqual(names(await select({ status: 'expired', withinMs: 7 * DAY }, NOW - SECOND)), ['ended-7d-ago', 'ended-7d-less-1s-ago']);
    await assert.rejects(select({ status: 'active', withinMs: DAY }), (error: LicenseServerError) => error.code === 'INVALID_INPUT' && /within/.test(error.message));
    await assert.rejects(select({ withinMs: DAY }), (error: LicenseServerError) => error.code === 'INVALID_INPUT');
    await assert.rejects(select({ status: 'lost' as LicenseStatus }), (error: LicenseServerError) => error.code === 'INVALID_INPUT');
  });

  it('seats=full: machines holding a seat at or over max_machines, as leases and files run out', async () => {
    assert.deepEqual(names(await select({ seats: 'full' })), ['floating-lease', 'full-deactivated', 'full-node-locked']);
    assert.deepEqual(names(await select({ seats: 'full', active: true })), ['floating-lease', 'full-node-locked']);
    // The lease ends at now + 1 s: from then on the seat is free.
    assert.deepEqual(names(await select({ seats: 'full', active: true }, NOW + SECOND)), ['full-node-locked']);
    // A deactivated machine whose offline file runs fills the second seat until it ends.
    await db.execute('UPDATE machines SET offline_until = ? WHERE license_id = ? AND active = ?', [iso(NOW + SECOND), id('one-of-two'), false]);
    try {
      assert.deepEqual(names(await select({ seats: 'full', active: true })), ['floating-lease', 'full-node-locked', 'one-of-two']);
      assert.deepEqual(names(await select({ seats: 'full', active: true }, NOW + SECOND)), ['full-node-locked']);
    } finally {
      await db.execute('UPDATE machines SET offline_until = NULL WHERE license_id = ?', [id('one-of-two')]);
    }
    const [full] = await select({ seats: 'full', customerId: customer.on, type: 'time_based', active: true, status: 'active' });
    assert.ok(full && full.machines_in_use! >= full.max_machines!);
  });

  it('usage=high: some entitlement at 80 % of its limit or more; entitlement by code', async () => {
    assert.deepEqual(names(await select({ usage: 'high' })), ['deactivated', 'ends-at-30d']);
    assert.deepEqual(names(await select({ usage: 'high', active: true })), ['ends-at-30d']);
    assert.deepEqual(names(await select({ entitlement: 'api-calls' })), ['deactivated', 'ends-at-30d', 'starts-now']);
    assert.deepEqual(names(await select({ entitlement: 'seats', usage: 'high' })), ['ends-at-30d']);
    assert.deepEqual(await select({ entitlement: 'no-such-code' }), []);
    await assert.rejects(select({ entitlement: 'Not A Code!' }), (error: LicenseServerError) => error.code === 'INVALID_ENTITLEMENT_CODE');
  });

  it('created, expires and validated ranges: after includes its instant, before excludes it', async () => {
    const all = await select({});
    const third = all[2]!;
    assert.deepEqual(names(await select({ createdBefore: new Date(third.created_at) })), names(all.slice(0, 2)));
    assert.deepEqual(names(await select({ createdAfter: new Date(third.created_at) })), names(all.slice(2)));
    assert.deepEqual(names(await select({ expiresAfter: new Date(NOW + 7 * DAY), expiresBefore: new Date(NOW + 7 * DAY + SECOND) })), ['ends-at-7d']);
    assert.deepEqual(names(await select({ expiresBefore: new Date(NOW) })), ['customer-off', 'ended-7d-ago', 'ended-7d-less-1s-ago']);
    // Last validation: the newest last_seen of the license's machines.
    assert.deepEqual(names(await select({ validatedAfter: new Date(NOW - DAY) })), ['full-node-locked', 'one-of-two']);
    assert.deepEqual(names(await select({ validatedAfter: new Date(NOW - 2 * DAY), validatedBefore: new Date(NOW) })), ['full-node-locked']);
    // Never validated counts as "not since".
    const quiet = names(await select({ validatedBefore: new Date(NOW - 5 * DAY) }));
    assert.ok(quiet.includes('ends-now') && quiet.includes('full-deactivated') && quiet.includes('floating-lease'), quiet.join());
    assert.ok(!quiet.includes('full-node-locked') && !quiet.includes('one-of-two'), quiet.join());
    assert.deepEqual(names(await select({ type: 'hybrid' })), ['starts-now']);
    assert.deepEqual(names(await select({ customerId: customer.off })), ['customer-off']);
  });

  it('pages by cursor through a filtered list, the cursor bound to its filters', async () => {
    const filter: LicenseConditions = { customerId: customer.on, active: true, expiresAfter: new Date(NOW) };
    const whole = (await listLicensesPage(db, { ...filter, limit: 100 }, new Date(NOW))).items;
    assert.ok(whole.length >= 6);
    for (const limit of [1, 2, 5]) {
      const walked = await walk((cursor) => listLicensesPage(db, { ...filter, limit, ...(cursor ? { cursor } : {}) }, new Date(NOW)));
      assert.deepEqual(walked.map((l) => l.id), whole.map((l) => l.id), `limit ${limit}`);
    }
    const first = await listLicensesPage(db, { status: 'expiring', withinMs: 30 * DAY, limit: 1 }, new Date(NOW));
    assert.ok(first.next_cursor);
    await assert.rejects(
      listLicensesPage(db, { status: 'expiring', withinMs: 7 * DAY, cursor: first.next_cursor }, new Date(NOW)),
      (error: LicenseServerError) => error.code === 'INVALID_INPUT' && /other filters/.test(error.message),
    );
    const second = await listLicensesPage(db, { status: 'expiring', withinMs: 30 * DAY, cursor: first.next_cursor }, new Date(NOW));
    assert.ok(!second.items.some((l) => l.id === first.items[0]!.id));
  });

  it('counts say as many as the list holds, and past the bound at least the bound', async () => {
    const filters: LicenseConditions[] = [
      {}, { status: 'expired' }, { status: 'expiring', withinMs: 30 * DAY }, { seats: 'full' }, { usage: 'high', active: true },
      { entitlement: 'api-calls' }, { validatedBefore: new Date(NOW - 5 * DAY) }, { type: 'hybrid' }, { customerId: customer.off },
    ];
    for (const conditions of filters) {
      const listed = await select(conditions);
      assert.deepEqual(await countLicenses(db, conditions, new Date(NOW)), { count: listed.length, exact: true }, JSON.stringify(conditions));
    }
    const total = (await select({})).length;
    assert.deepEqual(await countLicenses(db, {}, new Date(NOW), total), { count: total, exact: true });
    assert.deepEqual(await countLicenses(db, {}, new Date(NOW), total - 1), { count: total - 1, exact: false });
  });

  it('machines: license, seat, active, hardware ID and last seen filters, paged and counted', async () => {
    const select = (conditions: MachineConditions, at = NOW): Promise<Machine[]> =>
      walk((cursor) => listMachinesPage(db, { ...conditions, limit: 2, ...(cursor ? { cursor } : {}) }, new Date(at)));
    const all = await select({});
    assert.equal(all.length, 6);
    const cases: Array<[MachineConditions, (m: Machine) => boolean]> = [
      [{ licenseId: id('one-of-two') }, (m) => m.license_id === id('one-of-two')],
      [{ active: false }, (m) => !m.active],
      [{ holdingSeat: true }, (m) => m.holds_seat],
      [{ hardwareId: 'hw-shared' }, (m) => m.hardware_id === 'hw-shared'],
      [{ hardwareId: 'hw-shared', licenseId: id('one-of-two') }, (m) => m.hardware_id === 'hw-shared' && m.license_id === id('one-of-two')],
      [{ lastSeenAfter: new Date(NOW - DAY) }, (m) => Date.parse(m.last_seen) >= NOW - DAY],
      [{ lastSeenBefore: new Date(NOW - DAY) }, (m) => Date.parse(m.last_seen) < NOW - DAY],
    ];
    for (const [conditions, rule] of cases) {
      const listed = await select(conditions);
      const expected = all.filter(rule);
      assert.ok(expected.length > 0, JSON.stringify(conditions));
      assert.deepEqual(listed.map((m) => m.id), expected.map((m) => m.id), JSON.stringify(conditions));
      assert.deepEqual(await countMachines(db, conditions, new Date(NOW)), { count: expected.length, exact: true });
    }
    // The floating lease ends at now + 1 s.
    assert.equal((await select({ holdingSeat: true }, NOW + SECOND)).length, (await select({ holdingSeat: true })).length - 1);
    await assert.rejects(select({ hardwareId: '' }), (error: LicenseServerError) => error.code === 'INVALID_INPUT');
  });

  it('deliveries: retrying are the pending ones already tried; the attention counts are their lists', async () => {
    const delivery = (status: string, attempts: number) => insert(db, 'notification_deliveries', {
      id: randomUUID(), event_id: randomUUID(), event: 'license.created', occurred_at: iso(NOW), data: '{}', channel: 'webhook', target: 'ops',
      status, attempts, next_attempt_at: iso(NOW + 60 * SECOND), retry_from: iso(NOW), created_at: iso(NOW + (created += 1) * SECOND),
    });
    await delivery('pending', 0);
    await delivery('pending', 3);
    await delivery('pending', 1);
    await delivery('failed', 9);
    await delivery('delivered', 2);
    const retrying = (await listDeliveriesPage(db, { retrying: true })).items;
    assert.deepEqual(retrying.map((d) => [d.status, d.attempts]).sort(), [['pending', 1], ['pending', 3]]);
    assert.equal((await listDeliveriesPage(db, { retrying: false })).items.length, 3);
    assert.deepEqual(await countDeliveries(db, { status: 'failed' }), { count: 1, exact: true });

    const counts = await countAttentionLists(db, new Date(NOW));
    assert.deepEqual(counts, {
      licenses_expiring_7d: { count: 1, exact: true },
      licenses_expiring_30d: { count: 4, exact: true },
      licenses_expired_7d: { count: 2, exact: true },
      licenses_at_machine_limit: { count: 2, exact: true },
      licenses_usage_high: { count: 1, exact: true },
      deliveries_failed: { count: 1, exact: true },
      deliveries_retrying: { count: 2, exact: true },
    });
    // Each link's query, parsed as the route parses it, lists what the count counted.
    const { parseLicenseFilters } = await import('../../../src/http/list-filters.js');
    for (const [name, list] of Object.entries(ATTENTION_LISTS)) {
      if (!list.query.startsWith('/api/licenses?')) continue;
      const query = Object.fromEntries(new URLSearchParams(list.query.split('?')[1]));
      assert.equal((await select(parseLicenseFilters(query))).length, counts[name as keyof typeof counts].count, name);
    }
  });

  it('audit: counts with the list filters', async () => {
    for (let i = 0; i < 5; i += 1) {
      await insert(db, 'audit_log', { occurred_at: iso(NOW + i * SECOND), actor: 'cli:t', action: i % 2 ? 'a.odd' : 'a.even', entity_type: 'license', entity_id: id('ends-now'), details: '{}' });
    }
    assert.deepEqual(await countAudit(db, { action: 'a.odd' }), { count: 2, exact: true });
    assert.deepEqual(await countAudit(db, { entityId: id('ends-now'), since: new Date(NOW + SECOND), until: new Date(NOW + 4 * SECOND) }), { count: 3, exact: true });
    assert.deepEqual(await countAudit(db, {}, 4), { count: 4, exact: false });
  });
});
