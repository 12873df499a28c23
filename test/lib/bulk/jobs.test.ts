import assert from 'node:assert/strict';
import { bulkSelection } from '../../../src/http/bulk-selection.js';
import { listAudit } from '../../../src/lib/audit.js';
import { cancelBulkJob, createBulkJob, getBulkJob, previewBulk, type BulkJob, type BulkRequest } from '../../../src/lib/bulk/jobs.js';
import { BulkRunner, type BulkRunnerOptions } from '../../../src/lib/bulk/runner.js';
import { measureSelection } from '../../../src/lib/bulk/selection.js';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, setCustomerActive } from '../../../src/lib/customers.js';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { createLicense, getLicense, listLicensesPage, setLicenseActive, type License } from '../../../src/lib/licensing/licenses.js';
import { listMachinesPage, type Machine } from '../../../src/lib/licensing/machines.js';
import { validateOnline } from '../../../src/lib/licensing/online-validation.js';
import { ensureSigningKey } from '../../../src/lib/signing-keys/keys.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { scaledMs } from '../../support/busy-machine.js';
import { forEachEngine } from '../../support/engines.js';
import { deliveries, everyEventToWebhook } from '../../support/outbox-rows.js';

const DAY = 86_400_000;

forEachEngine('bulk jobs', (fixture) => {
  let db: Database;
  let url: string;
  let time: number;
  const clock = () => new Date(time);
  const operator: OperationContext = { actor: 'token:support', clock };
  const runners: BulkRunner[] = [];

  before(async () => {
    time = Date.parse('2026-11-23T10:00:00.000Z');
    url = await fixture.freshUrl();
    db = await openDatabase(url);
    await ensureSigningKey(db, operator);
    await everyEventToWebhook(db);
  });
  after(async () => {
    await db?.close();
  });
  afterEach(async () => {
    for (const runner of runners.splice(0)) await runner.stop();
  });

  /** A customer of its own with `count` licenses ending `days` days apart, created a millisecond apart. */
  async function customerWith(count: number, options: { firstEnd?: number; spacing?: number } = {}): Promise<{ customerId: string; licenses: License[] }> {
    const customerId = (await createCustomer(db, { name: `Customer ${time}` }, operator)).id;
    const licenses: License[] = [];
    for (let i = 0; i < count; i += 1) {
      time += 1;
      const end = new Date(time + ((options.firstEnd ?? 10) + i * (options.spacing ?? 1)) * DAY);
      licenses.push(await createLicense(db, { customerId, type: 'time_based', validUntil: end.toISOString() }, operator));
    }
    return { customerId, licenses };
  }

  function runner(options: Partial<BulkRunnerOptions> = {}): BulkRunner {
    const made = new BulkRunner({ database: () => db, select: bulkSelection, clock, batchSize: 3, batchMs: 60_000, pollMs: 60_000, yieldFactor: 0, ...options });
    runners.push(made);
    return made;
  }

  /** Starts a runner and waits until the job is over. */
  async function runToEnd(job: BulkJob, options: Partial<BulkRunnerOptions> = {}): Promise<BulkJob> {
    const started = runner(options);
    started.start();
    await waitFor(async () => ['done', 'failed', 'cancelled'].includes((await getBulkJob(db, job.id)).state));
    await started.idle();
    return getBulkJob(db, job.id);
  }

  async function allLicenses(filter: Record<string, string>): Promise<License[]> {
    const rows: License[] = [];
    let cursor: string | undefined;
    do {
      const page = await listLicensesPage(db, { ...bulkSelection('licenses', filter).conditions as object, limit: 4, ...(cursor ? { cursor } : {}) }, clock());
      rows.push(...page.items);
      cursor = page.next_cursor ?? undefined;
    } while (cursor);
    return rows;
  }

  const renewalsOf = async (id: string) => (await listAudit(db, { entityType: 'license', entityId: id, action: 'license.renewed', limit: 100 })).length;
  const eventsOf = async (event: string, id: string) => (await deliveries(db, event)).filter((row) => row.data.license_id === id).length;

  it('count what the list shows for the same filter, page after page of the count', async () => {
    const { customerId } = await customerWith(11);
    const other = await customerWith(2);
    await setLicenseActive(db, other.licenses[0]!.id, false, operator);
    const filters: Array<Record<string, string>> = [{ customer_id: customerId }, { active: 'true' }, { active: 'false' }, {}, { customer_id: customerId, type: 'usage_based' }];
    for (const filter of filters) {
      const listed = await allLicenses(filter);
      const selection = bulkSelection('licenses', filter);
      for (const chunk of [1, 4, 11, 10_000]) {
        const measured = await measureSelection(db, selection, clock(), chunk);
        assert.equal(measured.count, listed.length, `${JSON.stringify(filter)} counted by ${chunk}`);
        assert.deepEqual(measured.bound, listed.length ? [listed.at(-1)!.created_at, listed.at(-1)!.id] : null);
      }
      const preview = await previewBulk(db, { target: 'licenses', action: 'extend', by: '30d', filter }, bulkSelection, clock());
      assert.equal(preview.count, listed.length);
      assert.deepEqual(preview.first.map((row) => row.id), listed.slice(0, 5).map((license) => license.id));
    }
  });

  it('extend every license of a filter exactly once over several batches: its end, one audit entry and one event each', async () => {
    const { customerId, licenses } = await customerWith(10);
    const bystander = (await customerWith(1)).licenses[0]!;
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId } }, bulkSelection, operator);
    assert.equal(job.state, 'queued');
    assert.equal(job.total, 10);
    const batches: number[] = [];
    const finished = await runToEnd(job, { onBatch: (progress) => void batches.push(progress.done) });
    assert.deepEqual(batches, [3, 6, 9], 'three batches of three, then the last one finishes');
    assert.deepEqual({ state: finished.state, total: finished.total, done: finished.done, changed: finished.changed, failed: finished.failed, errors: finished.errors }, { state: 'done', total: 10, done: 10, changed: 10, failed: 0, errors: [] });
    for (const license of licenses) {
      assert.equal((await getLicense(db, license.id)).valid_until, new Date(Date.parse(license.valid_until) + 30 * DAY).toISOString());
      assert.equal(await renewalsOf(license.id), 1, license.id);
      assert.equal(await eventsOf('license.renewed', license.id), 1, license.id);
    }
    assert.equal((await getLicense(db, bystander.id)).valid_until, bystander.valid_until);
    const audit = await listAudit(db, { entityType: 'bulk_job', entityId: job.id });
    assert.deepEqual(audit.map((entry) => [entry.action, entry.actor]), [['bulk.finished', 'token:support'], ['bulk.started', 'token:support']]);
    assert.deepEqual(audit[1]!.details, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId }, total: 10 });
    assert.deepEqual(audit[0]!.details, { target: 'licenses', action: 'extend', by: '30d', state: 'done', total: 10, changed: 10, unchanged: 0, failed: 0 });
    const renewal = (await listAudit(db, { entityType: 'license', entityId: licenses[0]!.id, action: 'license.renewed' }))[0]!;
    assert.equal(renewal.actor, 'token:support', 'each row is audited under the token that made the job');
  });

  it('end a batch early when its time is up, and go on from the last row it did', async () => {
    const { customerId, licenses } = await customerWith(4);
    const batches: number[] = [];
    const finished = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: customerId } }, bulkSelection, operator), {
      batchMs: 0,
      onBatch: (progress) => void batches.push(progress.done),
    });
    assert.deepEqual(batches, [1, 2, 3], 'one row per batch when no time is left after it');
    assert.deepEqual([finished.state, finished.changed], ['done', 4]);
    for (const license of licenses) assert.equal(await renewalsOf(license.id), 1);
  });

  it('act once on each row when the action changes what the filter selects: suspend active=true, extend active=true', async () => {
    const { customerId, licenses } = await customerWith(8);
    // Suspending takes each license out of the filter as it goes: paging by offset would skip every other batch.
    const suspend = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'suspend', filter: { customer_id: customerId, active: 'true' } }, bulkSelection, operator));
    assert.deepEqual([suspend.state, suspend.changed, suspend.unchanged], ['done', 8, 0]);
    for (const license of licenses) {
      assert.equal((await getLicense(db, license.id)).active, false);
      assert.equal((await listAudit(db, { entityId: license.id, action: 'license.deactivated' })).length, 1);
      assert.equal(await eventsOf('license.deactivated', license.id), 1);
    }
    const reinstate = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'reinstate', filter: { customer_id: customerId, active: 'false' } }, bulkSelection, operator));
    assert.deepEqual([reinstate.state, reinstate.changed], ['done', 8]);
    // Extending keeps every license in the filter: walking it again from the start would never end.
    const extend = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '7d', filter: { customer_id: customerId, active: 'true' } }, bulkSelection, operator));
    assert.deepEqual([extend.state, extend.changed], ['done', 8]);
    for (const license of licenses) assert.equal(await renewalsOf(license.id), 1);
  });

  it('leave alone the licenses made after the job, and skip those that left the filter before their batch', async () => {
    const { customerId, licenses } = await customerWith(7);
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: customerId, active: 'true' } }, bulkSelection, operator);
    time += 1;
    const later = await createLicense(db, { customerId, type: 'time_based', validUntil: '2030-01-01' }, operator);
    await setLicenseActive(db, licenses[6]!.id, false, operator);
    const finished = await runToEnd(job);
    assert.deepEqual([finished.total, finished.changed, finished.failed], [7, 6, 0]);
    assert.equal(await renewalsOf(later.id), 0);
    assert.equal(await renewalsOf(licenses[6]!.id), 0);
  });

  it('report a row that cannot be done with its id and code, and do the rest', async () => {
    const { customerId, licenses } = await customerWith(5);
    await setLicenseActive(db, licenses[1]!.id, false, operator);
    await setLicenseActive(db, licenses[3]!.id, false, operator);
    const finished = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId } }, bulkSelection, operator));
    assert.deepEqual([finished.state, finished.changed, finished.failed], ['done', 3, 2]);
    assert.deepEqual(finished.errors.map((error) => [error.id, error.code]), [[licenses[1]!.id, 'LICENSE_INACTIVE'], [licenses[3]!.id, 'LICENSE_INACTIVE']]);
    for (const [i, license] of licenses.entries()) assert.equal(await renewalsOf(license.id), i === 1 || i === 3 ? 0 : 1);
    // A refused row leaves nothing behind: no event either.
    assert.equal(await eventsOf('license.renewed', licenses[1]!.id), 0);

    const customer = await customerWith(2);
    await setCustomerActive(db, customer.customerId, false, operator);
    const refused = await runToEnd(await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customer.customerId } }, bulkSelection, operator));
    assert.deepEqual(refused.errors.map((error) => error.code), ['CUSTOMER_INACTIVE', 'CUSTOMER_INACTIVE']);
  });

  it('refuse a second job while one is queued or running, on any connection to the database', async () => {
    const { customerId } = await customerWith(2);
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: customerId } }, bulkSelection, operator);
    const second = await openDatabase(url);
    try {
      await assert.rejects(createBulkJob(second, second, { target: 'machines', action: 'deactivate', filter: {} }, bulkSelection, operator), (error: unknown) => {
        assert.ok(error instanceof LicenseServerError && error.code === 'BULK_JOB_RUNNING', String(error));
        assert.match(error.message, new RegExp(job.id));
        return true;
      });
      // The unique index decides, not the look before it: two inserts at once, one wins.
      await cancelBulkJob(db, job.id, operator);
      const request: BulkRequest = { target: 'licenses', action: 'suspend', filter: { customer_id: customerId } };
      const outcomes = await Promise.allSettled([createBulkJob(db, db, request, bulkSelection, operator), createBulkJob(second, second, request, bulkSelection, operator)]);
      const made = outcomes.filter((outcome): outcome is PromiseFulfilledResult<BulkJob> => outcome.status === 'fulfilled');
      assert.equal(made.length, 1, JSON.stringify(outcomes.map((outcome) => outcome.status === 'rejected' ? String(outcome.reason) : 'made')));
      assert.equal(((outcomes.find((outcome) => outcome.status === 'rejected') as PromiseRejectedResult).reason as LicenseServerError).code, 'BULK_JOB_RUNNING');
      await cancelBulkJob(db, made[0]!.value.id, operator);
    } finally {
      await second.close();
    }
  });

  it('cancel a running job between batches: what was done stays done and counted, nothing more is', async () => {
    const { customerId, licenses } = await customerWith(9);
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '1d', filter: { customer_id: customerId } }, bulkSelection, operator);
    const finished = await runToEnd(job, { onBatch: async (progress) => void (progress.done === 3 && (await cancelBulkJob(db, job.id, { actor: 'token:lead', clock }))) });
    assert.deepEqual([finished.state, finished.changed], ['cancelled', 3]);
    const renewed = await Promise.all(licenses.map((license) => renewalsOf(license.id)));
    assert.deepEqual(renewed, [1, 1, 1, 0, 0, 0, 0, 0, 0]);
    const [closing] = await listAudit(db, { entityType: 'bulk_job', entityId: job.id, action: 'bulk.finished' });
    assert.equal(closing!.actor, 'token:lead');
    assert.equal(closing!.details.cancelled_by, 'token:lead');
    await assert.rejects(cancelBulkJob(db, job.id, operator), (error: LicenseServerError) => error.code === 'BULK_JOB_FINISHED');
  });

  it('resume a job its daemon stopped mid-way, from the row after the last batch done', async () => {
    const { customerId, licenses } = await customerWith(10);
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId } }, bulkSelection, operator);
    const first = runner({ onBatch: (progress) => void (progress.done === 6 && first.stop()) });
    first.start();
    await waitFor(async () => (await getBulkJob(db, job.id)).state === 'queued' && (await getBulkJob(db, job.id)).done === 6);
    await first.idle();
    const paused = await getBulkJob(db, job.id);
    assert.deepEqual([paused.state, paused.done, paused.resumed], ['queued', 6, 0]);
    const finished = await runToEnd(job);
    assert.deepEqual([finished.state, finished.changed, finished.resumed], ['done', 10, 1]);
    for (const license of licenses) {
      assert.equal((await getLicense(db, license.id)).valid_until, new Date(Date.parse(license.valid_until) + 30 * DAY).toISOString());
      assert.equal(await renewalsOf(license.id), 1);
      assert.equal(await eventsOf('license.renewed', license.id), 1);
    }
  });

  it('take over a job whose runner stopped renewing its claim once the claim runs out; the old runner then stops', async () => {
    const { customerId, licenses } = await customerWith(9);
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'extend', by: '30d', filter: { customer_id: customerId } }, bulkSelection, operator);
    let unstick: () => void = () => undefined;
    const stuck = new Promise<void>((resolve) => (unstick = resolve));
    const hung = runner({ leaseMs: 60_000, onBatch: (progress) => (progress.done === 3 ? stuck : undefined) });
    hung.start();
    await waitFor(async () => (await getBulkJob(db, job.id)).done === 3);
    const other = runner({ leaseMs: 60_000 });
    other.start();
    other.wake();
    await other.idle();
    assert.equal((await getBulkJob(db, job.id)).done, 3, 'a live claim is not taken while its lease runs');
    time += 61_000;
    other.wake();
    await waitFor(async () => (await getBulkJob(db, job.id)).state === 'done');
    unstick();
    await hung.idle();
    const finished = await getBulkJob(db, job.id);
    assert.deepEqual([finished.changed, finished.resumed], [9, 1]);
    for (const license of licenses) assert.equal(await renewalsOf(license.id), 1);
  });

  it('deactivate and reactivate the machines of a filter, each audited as the single action is', async () => {
    const license = (await customerWith(1)).licenses[0]!;
    const online = { actor: 'client:127.0.0.1', clock, issuer: 'licenses.example.com', graceHours: 72 };
    for (const hardwareId of ['HW-1', 'HW-2', 'HW-3', 'HW-4']) await validateOnline(db, { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' }, online);
    const machines = (await listMachinesPage(db, { licenseId: license.id }, clock())).items as Machine[];
    assert.equal(machines.length, 4);
    const preview = await previewBulk(db, { target: 'machines', action: 'deactivate', filter: { license_id: license.id } }, bulkSelection, clock());
    assert.equal(preview.count, 4);
    const off = await runToEnd(await createBulkJob(db, db, { target: 'machines', action: 'deactivate', filter: { license_id: license.id } }, bulkSelection, operator));
    assert.deepEqual([off.state, off.changed], ['done', 4]);
    for (const machine of machines) {
      assert.deepEqual((await listAudit(db, { entityType: 'machine', entityId: machine.id, action: 'machine.deactivated' })).map((entry) => entry.actor), ['token:support']);
    }
    const again = await runToEnd(await createBulkJob(db, db, { target: 'machines', action: 'deactivate', filter: { license_id: license.id } }, bulkSelection, operator));
    assert.deepEqual([again.changed, again.unchanged], [0, 4], 'already deactivated: nothing written, as the single action writes nothing');
    const on = await runToEnd(await createBulkJob(db, db, { target: 'machines', action: 'reactivate', filter: { license_id: license.id } }, bulkSelection, operator));
    assert.deepEqual([on.state, on.changed], ['done', 4]);
  });

  it('refuse a bad action, span or filter before making anything', async () => {
    const cases: Array<[BulkRequest, string]> = [
      [{ target: 'customers', action: 'extend', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'delete', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'extend', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'extend', by: '30 days', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', by: '30d', filter: {} }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', filter: { holding_seat: 'true' } }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', filter: { active: 'yes' } }, 'INVALID_INPUT'],
      [{ target: 'licenses', action: 'suspend', filter: { customer_id: 'acme' } }, 'INVALID_ID'],
      [{ target: 'machines', action: 'extend', by: '1d', filter: {} }, 'INVALID_INPUT'],
    ];
    for (const [request, code] of cases) {
      await assert.rejects(createBulkJob(db, db, request, bulkSelection, operator), (error: LicenseServerError) => error.code === code, JSON.stringify(request));
      await assert.rejects(previewBulk(db, request, bulkSelection, clock()), (error: LicenseServerError) => error.code === code, JSON.stringify(request));
    }
    assert.equal((await db.query("SELECT id FROM bulk_jobs WHERE state IN ('queued', 'running')")).length, 0);
  });

  it('finish at once a job whose filter selects nothing', async () => {
    const job = await createBulkJob(db, db, { target: 'licenses', action: 'suspend', filter: { customer_id: '00000000-0000-4000-8000-000000000000' } }, bulkSelection, operator);
    assert.deepEqual([job.state, job.total, job.done], ['done', 0, 0]);
    assert.deepEqual((await listAudit(db, { entityId: job.id })).map((entry) => entry.action), ['bulk.finished', 'bulk.started']);
  });

});

async function waitFor(condition: () => Promise<boolean>, ms = scaledMs(20_000)): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
