import assert from 'node:assert/strict';
import { auditListQuery, listAuditPage, type AuditFilter } from '../../../src/lib/audit.js';
import { customerListQuery, listCustomersPage, type CustomerFilter } from '../../../src/lib/customers.js';
import { licenseListQuery, listLicensesPage, type LicenseFilter } from '../../../src/lib/licensing/licenses.js';
import { listMachinesPage, machineListQuery, type MachineFilter } from '../../../src/lib/licensing/machines.js';
import { listUsageRecordsPage, usageListQuery, type UsageFilter } from '../../../src/lib/licensing/usage-view.js';
import { deliveryListQuery, listDeliveriesPage, type DeliveryFilter } from '../../../src/lib/notifications/deliveries.js';
import type { ListPage, PageQuery } from '../../../src/lib/paging.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';
import { explain, fillStore, planProblems, type FilledStore } from '../../support/query-plans.js';

/**
 * Every list query, with each filter it accepts, on its first page and on a page after a
 * cursor, is planned on a store big enough that the planners prefer indexes: none may read a
 * big table whole or sort it (SQLite: SCAN without an index, USE TEMP B-TREE; PostgreSQL: Seq
 * Scan of a big table, Sort). The SQL is the list functions' own (their *ListQuery builders).
 */
interface ListCase<F> {
  readonly name: string;
  readonly filters: (store: FilledStore) => Record<string, F>;
  readonly query: (filter: F, store: FilledStore) => PageQuery;
  /** The real list function, for a cursor to plan the next page with. */
  readonly page: (db: Database, filter: F, store: FilledStore) => Promise<ListPage<unknown>>;
  /**
   * Filters that pick out a few rows, by the name of the index their plans must read: a plan
   * that walks another filter's index in order (every checkout in the log, to find one
   * license's) neither scans nor sorts, yet costs as much as a scan.
   */
  readonly selective?: Readonly<Record<string, string>>;
  /**
   * Filters that pick out a few rows by a range of another index than the list's order (a
   * status window on valid_until), by that index's name: their plans must read it, and may
   * then sort the few rows it gave ('': the index is not checked).
   */
  readonly sortsFew?: Readonly<Record<string, string>>;
  /**
   * Filters that select few rows by a rule no index can hold (it depends on the time and on
   * other tables), and may read the table to find them: a planner that expects few rows reads
   * it whole, one that expects many walks the list's index. The reason is said here.
   */
  readonly scans?: Readonly<Record<string, string>>;
}

const at = new Date('2025-06-01T00:00:00.000Z');
/** While fillStore's licenses run (2025-01-01 to late April), so that status filters select some. */
const licensesAt = new Date('2025-02-01T00:00:00.000Z');

const cases = [
  {
    name: 'licenses',
    filters: (store) => ({
      none: {},
      customer: { customerId: store.customerIds[3] },
      active: { active: true },
      inactive: { active: false },
      type: { type: 'hybrid' },
      'customer and active': { customerId: store.customerIds[3], active: true },
      'customer and type': { customerId: store.customerIds[3], type: 'hybrid' },
      'customer, inactive and type': { customerId: store.customerIds[3], active: false, type: 'time_based' },
      'active and type': { active: false, type: 'usage_based' },
      // The list filters of issue 36 (license-filters.ts).
      'expiring (7 days)': { status: 'expiring' },
      'expiring within 30 days': { status: 'expiring', withinMs: 30 * 86_400_000 },
      'expired within 7 days': { status: 'expired', withinMs: 7 * 86_400_000 },
      'status active': { status: 'active' },
      'status expired': { status: 'expired' },
      'status suspended': { status: 'suspended' },
      'status pending': { status: 'pending' },
      'status active and type': { status: 'active', type: 'hybrid', active: true },
      'seats full': { seats: 'full' },
      'seats full and active': { seats: 'full', active: true },
      'usage high': { usage: 'high' },
      'usage high and active': { usage: 'high', active: true },
      entitlement: { entitlement: 'export' },
      'created range': { createdAfter: new Date(store.startedAt + 1_000), createdBefore: new Date(store.startedAt + 20_000) },
      'validated after': { validatedAfter: new Date(store.startedAt + 40_000) },
      'validated before': { validatedBefore: new Date(store.startedAt + 40_000) },
      'customer and status': { customerId: store.customerIds[3], status: 'expired' },
    }),
    sortsFew: {
      'expiring (7 days)': 'licenses_valid_until',
      'expiring within 30 days': 'licenses_valid_until',
      'expired within 7 days': 'licenses_valid_until',
      // Few start in the future: licenses_valid_from, or (SQLite without statistics) the created index in order.
      'status pending': '',
      // fillStore grants no entitlements: PostgreSQL reads the empty table rather than its index.
      'usage high': '',
      'usage high and active': '',
    },
    scans: {
      'seats full': 'seats held depend on the time and on leases',
      'seats full and active': 'seats held depend on the time and on leases',
      'validated before': 'an index on machines.last_seen would cost every validation\'s bookkeeping write',
      'validated after': 'an index on machines.last_seen would cost every validation\'s bookkeeping write',
    },
    selective: {
      customer: 'licenses_customer_created',
      'customer and active': 'licenses_customer_created',
      'customer and type': 'licenses_customer_created',
      'customer, inactive and type': 'licenses_customer_created',
      'customer and status': 'licenses_customer_created',
    },
    query: (filter) => licenseListQuery(filter, licensesAt),
    page: (db, filter) => listLicensesPage(db, filter, licensesAt),
  } satisfies ListCase<LicenseFilter>,
  {
    name: 'customers',
    filters: () => ({ none: {}, active: { active: true }, inactive: { active: false } }),
    query: (filter) => customerListQuery(filter),
    page: (db, filter) => listCustomersPage(db, filter),
  } satisfies ListCase<CustomerFilter>,
  {
    name: 'machines',
    filters: (store) => ({
      none: {},
      license: { licenseId: store.licenseIds[5] },
      'holding a seat': { holdingSeat: true },
      'not holding a seat': { holdingSeat: false },
      'license and holding a seat': { licenseId: store.licenseIds[5], holdingSeat: true },
      'hardware id': { hardwareId: 'hw-17' },
      'hardware id and license': { hardwareId: 'hw-17', licenseId: store.licenseIds[17] },
      deactivated: { active: false },
      'last seen before': { lastSeenBefore: new Date(store.startedAt + 30_000) },
      'last seen after': { lastSeenAfter: new Date(store.startedAt + 30_000) },
    }),
    selective: { 'hardware id': 'machines_hardware_first_seen', license: 'machines_license_first_seen', 'hardware id and license': 'machines_license_first_seen' },
    scans: {
      'last seen before': 'an index on machines.last_seen would cost every validation\'s bookkeeping write',
      'last seen after': 'an index on machines.last_seen would cost every validation\'s bookkeeping write',
    },
    query: (filter) => machineListQuery(filter, at),
    page: (db, filter) => listMachinesPage(db, filter, at),
  } satisfies ListCase<MachineFilter>,
  {
    name: 'audit',
    filters: (store) => {
      const since = new Date(store.startedAt + 20_000_000);
      const until = new Date(store.startedAt + 30_000_000);
      return {
        none: {},
        action: { action: 'license.renewed' },
        actor: { actor: 'token:ci' },
        'entity type': { entityType: 'customer' },
        'entity id': { entityId: store.licenseIds[9] },
        'entity type and id': { entityType: 'license', entityId: store.licenseIds[10] },
        since: { since: new Date(store.startedAt + 40_000_000) },
        'since, no match': { since: new Date(store.startedAt + 400_000_000) },
        until: { until },
        'since and until': { since: new Date(store.startedAt + 10_000), until: new Date(store.startedAt + 30_000) },
        'action since': { action: 'license.created', since },
        'entity id since': { entityId: store.licenseIds[9], since: new Date(store.startedAt) },
        'actor and action until': { actor: 'cli:bob', action: 'customer.created', until },
        // `license show`'s recent checkouts, and the voids after the oldest of them.
        "one license's checkouts": { action: 'license.checked_out', entityType: 'license', entityId: store.licenseIds[11] },
        "one license's voids since": { action: 'license.checkout_voided', entityType: 'license', entityId: store.licenseIds[11], since },
        'entity id and actor': { actor: 'token:ci', entityId: store.licenseIds[12] },
      };
    },
    selective: {
      'entity id': 'audit_log_entity_id_occurred',
      'entity type and id': 'audit_log_entity_id_occurred',
      'entity id since': 'audit_log_entity_id_occurred',
      "one license's checkouts": 'audit_log_entity_id_occurred',
      "one license's voids since": 'audit_log_entity_id_occurred',
      'entity id and actor': 'audit_log_entity_id_occurred',
    },
    query: (filter) => auditListQuery(filter),
    page: (db, filter) => listAuditPage(db, filter),
  } satisfies ListCase<AuditFilter>,
  {
    name: 'usage records',
    filters: (store) => ({ none: {}, since: { since: new Date(store.startedAt + 1_000_000) } }),
    query: (filter, store) => usageListQuery(store.usageLicenseId, filter),
    page: (db, filter, store) => listUsageRecordsPage(db, store.usageLicenseId, filter),
  } satisfies ListCase<UsageFilter>,
  {
    name: 'notification deliveries',
    filters: () => ({
      none: {},
      failed: { status: 'failed' },
      pending: { status: 'pending' },
      event: { event: 'backup.succeeded' },
      'failed and event': { status: 'failed', event: 'backup.succeeded' },
      retrying: { retrying: true },
    }),
    query: (filter) => deliveryListQuery(filter),
    page: (db, filter) => listDeliveriesPage(db, filter),
  } satisfies ListCase<DeliveryFilter>,
];

forEachEngine('list query plans', (fixture) => {
  let db: Database;
  let store: FilledStore;

  before(async function () {
    this.timeout(180_000);
    db = await fixture.freshDatabase();
    store = await fillStore(db);
    // PostgreSQL's autovacuum gathers statistics on its own; the planner is lost without them.
    if (fixture.engine === 'postgres') await db.execute('ANALYZE');
  });

  // SQLite has statistics only where someone ran ANALYZE, which the app never does: its
  // plans must hold as it leaves a store, and after an operator's ANALYZE too.
  const statistics = fixture.engine === 'sqlite' ? (['no statistics (as the app leaves a store)', 'after ANALYZE'] as const) : (['statistics'] as const);
  for (const state of statistics) {
    describe(state, () => {
      if (state === 'after ANALYZE') before(async () => db.execute('ANALYZE'));
      for (const list of cases as Array<ListCase<Record<string, unknown>>>) {
        it(`${list.name}: every filter, first page and after a cursor, reads an index in order`, async () => {
          const failures: string[] = [];
          for (const [name, filter] of Object.entries(list.filters(store))) {
            const first = await list.page(db, { ...filter, limit: 2 }, store);
            const pages: Array<[string, PageQuery]> = [[`${name}, first page`, list.query(filter, store)]];
            if (first.next_cursor !== null) pages.push([`${name}, after a cursor`, list.query({ ...filter, cursor: first.next_cursor }, store)]);
            for (const [label, query] of pages) {
              const plan = await explain(db, query.sql, query.params);
              const ranged = list.sortsFew?.[name];
              const problems = list.scans?.[name] !== undefined ? [] : planProblems(fixture.engine, plan).filter((line) => ranged === undefined || !/TEMP B-TREE|Sort/.test(line));
              if (ranged && !plan.some((line) => line.includes(ranged))) problems.push(`reads another index than ${ranged}`);
              const index = list.selective?.[name];
              if (index !== undefined && !plan.some((line) => line.includes(index))) problems.push(`reads another index than ${index}`);
              if (problems.length > 0) failures.push(`${label}: ${problems.join('; ')}\n    plan: ${plan.join(' | ')}`);
            }
          }
          assert.deepEqual(failures, [], `plans that scan or sort:\n${failures.join('\n')}`);
        });
      }
    });
  }

  it('flags a plan that sorts or scans (the check can fail)', async () => {
    const plan = await explain(db, 'SELECT id FROM licenses ORDER BY updated_at LIMIT 5', []);
    assert.notDeepEqual(planProblems(fixture.engine, plan), [], plan.join(' | '));
  });
});
