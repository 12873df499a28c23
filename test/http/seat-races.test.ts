import assert from 'node:assert/strict';
import { listMachines } from '../../src/lib/licensing/machines.js';
import { forEachEngine } from '../support/engines.js';
import { FakeClock } from '../support/fake-clock.js';
import { IN_PROCESS_ADMIN_TOKEN, startInProcessDaemon, type InProcessDaemon } from '../support/in-process-daemon.js';
import { prng } from '../support/prng.js';
import { api } from '../support/serve.js';

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;

/** SEAT_RACE_SEED=<seed> repeats a run; each run prints its seed. */
const seed = Number(process.env.SEAT_RACE_SEED ?? Date.now() % 1_000_000);

interface Terms {
  readonly title: string;
  readonly max: number;
  readonly floating: boolean;
}

/**
 * Every path that changes a seat, at once, on two daemons sharing one database: validations
 * of machines holding seats and of new hardware IDs, releases, checkouts, deactivations and
 * reactivations, files declared lost, and leases running out as the clock moves between
 * rounds (past the once-a-minute lease bookkeeping, past a lease, past a file). After each
 * round, at the clock's time:
 * - the database counts no more machines holding a seat than the limit;
 * - no more machines than the limit hold something signed that can still be used offline
 *   (a grace token or a file, unless the file was declared lost), and each such machine's
 *   seat is held at least until that thing ends.
 */
forEachEngine('seats under concurrent changes on two daemons', (fixture) => {
  const clock = new FakeClock(Date.parse('2026-11-23T10:00:00.000Z'));
  const now = () => clock.now();
  let daemons: InProcessDaemon[] = [];
  let customerId: string;
  const admin = (method: string, route: string, body?: unknown) =>
    api(daemons[0]!.url, method, route, { token: IN_PROCESS_ADMIN_TOKEN, body });

  before(async () => {
    const url = await fixture.freshUrl();
    // One after the other: the first creates the schema and the signing key.
    daemons = [await startInProcessDaemon(url, now)];
    daemons.push(await startInProcessDaemon(url, now));
    customerId = (await admin('POST', '/api/customers', { name: 'Racing Ltd' })).body.id;
  });
  after(async () => {
    for (const daemon of daemons) await daemon.stop();
  });

  const terms: Terms[] = [
    { title: 'floating, 3 seats, 1-hour leases', max: 3, floating: true },
    { title: 'node-locked, 2 seats', max: 2, floating: false },
  ];
  for (const { title, max, floating } of terms) {
    it(`never let more machines than the limit hold a seat or anything signed (${title})`, async function () {
      this.timeout(120_000);
      const random = prng(seed + max);
      const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
      const shuffle = <T>(items: T[]): T[] => {
        for (let i = items.length - 1; i > 0; i -= 1) {
          const j = Math.floor(random() * (i + 1));
          [items[i], items[j]] = [items[j]!, items[i]!];
        }
        return items;
      };
      console.log(`      seed ${seed} (SEAT_RACE_SEED=${seed} repeats this run)`);
      const license = (await admin('POST', '/api/licenses', {
        customer_id: customerId, type: 'time_based', valid_until: '2099-01-01', max_machines: max, with_decryption_key: true,
        ...(floating ? { floating: true, lease_hours: 1 } : {}),
      })).body;
      assert.ok(license.id, JSON.stringify(license));

      // What each hardware ID holds that works offline: its newest grace token's end, its files' ends.
      const tokens = new Map<string, number>();
      const files = new Map<string, number[]>();
      const machineIds = new Map<string, string>();
      const deactivated = new Set<string>();
      let fresh = 0;
      const newId = () => `M-${fresh++}`;

      for (let round = 1; round <= 6; round += 1) {
        const context = `seed ${seed}, ${title}, round ${round}`;
        const known = [...machineIds.keys()];
        const checkedOut = new Set<string>();
        const operations: Array<() => Promise<{ what: string; status: number; body: any }>> = [];
        const on = () => pick(daemons).url;
        const validate = (hardwareId: string) => async () => {
          const reply = await api(on(), 'POST', '/api/v1/validate', { body: { license_key: license.key, hardware_id: hardwareId, version: '1.0.0' } });
          if (reply.body?.valid === true) {
            tokens.set(hardwareId, Math.max(tokens.get(hardwareId) ?? 0, Date.parse(reply.body.grace_expires_at)));
            machineIds.set(hardwareId, reply.body.machine_id);
          }
          return { what: `validate ${hardwareId}`, status: reply.status, body: reply.body };
        };
        for (const hardwareId of known) {
          operations.push(async () => {
            const reply = await api(on(), 'POST', '/api/v1/release', { body: { license_key: license.key, hardware_id: hardwareId } });
            return { what: `release ${hardwareId}`, status: reply.status, body: reply.body };
          });
          for (let i = 0; i < 4; i += 1) operations.push(validate(hardwareId));
        }
        for (let i = 0; i < 12 + Math.floor(random() * 28); i += 1) operations.push(validate(newId()));
        for (let i = 0; i < 3; i += 1) {
          const hardwareId = known.length > 0 && random() < 0.5 ? pick(known) : newId();
          checkedOut.add(hardwareId);
          operations.push(async () => {
            const reply = await api(on(), 'POST', `/api/licenses/${license.id}/checkout`, {
              token: IN_PROCESS_ADMIN_TOKEN, body: { ttl_days: 1, hardware_id: hardwareId },
            });
            if (reply.status === 200) {
              files.set(hardwareId, [...(files.get(hardwareId) ?? []), Date.parse(reply.body.valid_until)]);
            }
            return { what: `checkout ${hardwareId}`, status: reply.status, body: reply.body };
          });
        }
        const adminChange = (hardwareId: string, action: string, body?: unknown) => async () => {
          const reply = await api(on(), 'POST', `/api/machines/${machineIds.get(hardwareId)}/${action}`, { token: IN_PROCESS_ADMIN_TOKEN, body });
          return { what: `${action} ${hardwareId}`, status: reply.status, body: reply.body };
        };
        const withId = known.filter((hardwareId) => !checkedOut.has(hardwareId));
        if (withId.length > 0) {
          const target = pick(withId);
          const active = !deactivated.has(target);
          operations.push(adminChange(target, active ? 'deactivate' : 'activate'));
          if (active) deactivated.add(target);
          else deactivated.delete(target);
        }
        // A file declared lost no longer counts as usable; none of that machine's files is being made meanwhile.
        const lost = withId.filter((hardwareId) => (files.get(hardwareId) ?? []).some((end) => end > now().getTime()));
        for (const target of shuffle(lost).slice(0, 2)) {
          operations.push(async () => {
            const result = await adminChange(target, 'release', { lost_file: true })();
            if (result.status === 200) files.delete(target);
            return result;
          });
        }

        const results = await Promise.all(shuffle(operations).map((operation) => operation()));
        // Refusals are answers too; anything else is a fault of the test or the server.
        const unexpected = results.filter(({ status, body }) =>
          status !== 200 && !(status === 422 && ['MACHINE_LIMIT_EXCEEDED', 'MACHINE_DEACTIVATED'].includes(body?.error?.code)));

        const at = now().getTime();
        const machines = await listMachines(daemons[1]!.db, { licenseId: license.id, limit: 1000 }, now());
        const holding = machines.filter((machine) => machine.holds_seat);
        assert.ok(holding.length <= max, `${context}: ${holding.length} of ${max} seats held: ${holding.map((m) => m.hardware_id).join(', ')}`);
        const usable = new Map<string, number>();
        for (const [hardwareId, end] of tokens) if (end > at) usable.set(hardwareId, end);
        for (const [hardwareId, ends] of files) for (const end of ends) if (end > at) usable.set(hardwareId, Math.max(usable.get(hardwareId) ?? 0, end));
        assert.ok(usable.size <= max, `${context}: ${usable.size} machines of ${max} hold something signed that works offline: ${[...usable.keys()].join(', ')}`);
        for (const [hardwareId, end] of usable) {
          const machine = machines.find((m) => m.hardware_id === hardwareId)!;
          const heldUntil = machine.active && !floating
            ? Number.POSITIVE_INFINITY
            : Math.max(Date.parse(machine.lease_expires_at ?? '1970-01-01T00:00:00Z'), Date.parse(machine.offline_until ?? '1970-01-01T00:00:00Z'));
          if (heldUntil < end) {
            assert.fail(`${context}: ${hardwareId} holds something signed until ${new Date(end).toISOString()} but its seat only until ${new Date(heldUntil).toISOString()}`);
          }
        }
        assert.deepEqual(unexpected.map(({ what, status, body }) => `${what}: ${status} ${JSON.stringify(body)}`), [], context);
        // Machines first recorded by a checkout validate, release and lose files from now on too.
        for (const machine of machines) machineIds.set(machine.hardware_id, machine.id);

        // Past the once-a-minute lease bookkeeping, and now and then past a lease or a file.
        clock.advance(pick([62_000, 62_000, 20 * MINUTE, HOUR + MINUTE, DAY + MINUTE]));
      }
    });
  }
});
