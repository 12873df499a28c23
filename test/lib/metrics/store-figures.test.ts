import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createCustomer } from '../../../src/lib/customers.js';
import { createLicense, setLicenseActive } from '../../../src/lib/licensing/licenses.js';
import { seatHeld } from '../../../src/lib/licensing/machines.js';
import { readStoreFigures } from '../../../src/lib/metrics/store-figures.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';
import { prng } from '../../support/prng.js';

const HOUR = 3_600_000;

/**
 * The store's seats and near-full licenses are counted without a license lookup per machine
 * (issue 35 item 29). They must still be what the seat rule says: here against the rule
 * itself (seatHeld, one join per machine, as the figures were counted before), on licenses and
 * machines of every kind.
 */
forEachEngine('metrics: the store\'s seat figures follow the seat rule', (fixture) => {
  let db: Database;
  const at = new Date('2026-06-01T12:00:00.000Z');
  const context = { actor: 'cli:test', clock: () => at };

  before(async () => {
    db = await fixture.freshDatabase();
    const random = prng(35_29);
    const pick = <T>(values: readonly T[]): T => values[Math.floor(random() * values.length)]!;
    const customer = await createCustomer(db, { name: 'Initech' }, context);
    const stamps = [null, new Date(at.getTime() - HOUR).toISOString(), new Date(at.getTime() + HOUR).toISOString()];
    for (let i = 0; i < 120; i += 1) {
      const maxMachines = pick([null, 1, 2, 3, 10]);
      const floating = maxMachines !== null && random() < 0.4;
      const license = await createLicense(db, { customerId: customer.id, type: 'hybrid', validUntil: '2099-12-31', maxMachines, floating }, context);
      if (random() < 0.2) await setLicenseActive(db, license.id, false, context);
      const machines = pick([0, 1, 2, 3, 4]);
      for (let m = 0; m < machines; m += 1) {
        const active = random() < 0.7;
        await db.execute(
          'INSERT INTO machines (id, license_id, hardware_id, active, first_seen, last_seen, lease_expires_at, offline_until, deactivated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
          [randomUUID(), license.id, `HW-${i}-${m}`, active, at.toISOString(), at.toISOString(), pick(stamps), pick(stamps), active ? null : at.toISOString()],
        );
      }
    }
  });

  it('counts seats, machines and licenses near their limit as the seat rule does', async () => {
    const held = seatHeld(at);
    const [seats] = await db.query(`SELECT count(*) AS n FROM machines m JOIN licenses l ON l.id = m.license_id WHERE ${held.sql}`, held.params);
    const [active] = await db.query('SELECT count(*) AS n FROM machines WHERE active = ?', [true]);
    const [all] = await db.query('SELECT count(*) AS n FROM machines');
    const [near] = await db.query(
      `SELECT count(*) AS n FROM (
         SELECT l.max_machines AS max_machines, count(*) AS used FROM machines m JOIN licenses l ON l.id = m.license_id
         WHERE l.max_machines IS NOT NULL AND l.active = ? AND ${held.sql} GROUP BY l.id, l.max_machines
       ) per_license WHERE used * 10 >= max_machines * 9`,
      [true, ...held.params],
    );
    // The data have every case the rule distinguishes.
    assert.ok(Number(seats!.n) > 20 && Number(near!.n) > 5, `seats ${seats!.n}, near ${near!.n}`);
    const figures = await readStoreFigures(db, { at, targets: [] });
    assert.deepEqual(
      { seats: figures.seatsInUse, active: figures.machines.active, deactivated: figures.machines.deactivated, near: figures.licensesNearMachineLimit },
      { seats: Number(seats!.n), active: Number(active!.n), deactivated: Number(all!.n) - Number(active!.n), near: Number(near!.n) },
    );
  });
});
