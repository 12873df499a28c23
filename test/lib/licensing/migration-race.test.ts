import assert from 'node:assert/strict';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer } from '../../../src/lib/customers.js';
import { createLicense, getLicense } from '../../../src/lib/licensing/licenses.js';
import { admitMachine, listMachines, migrateMachine } from '../../../src/lib/licensing/machines.js';
import type { Database, Queryable } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const HW1 = 'hw1-6f1c2d3e4a5b6c7d8e9f0a1b2c3d4e5f60718293';
const HW2 = `hw2-${'cd'.repeat(32)}`;

/**
 * A machine moving from hw1 to hw2 while something else records the hw2 ID on the same
 * license (an operator's checkout for it, or a validation without the previous ID). On an
 * unlimited license the other admission took no lock for a new machine, so on PostgreSQL its
 * INSERT (waiting on the license row the move had locked, through the foreign key) and the
 * move's UPDATE (waiting on that INSERT's unique entry) deadlocked; the transaction retried
 * was the move's, which then found the ID taken and left the hw1 machine beside a new one: two
 * machines for one, the migration lost (and, once the retries ran out, a 500). The test holds
 * the move right before its UPDATE and runs the other admission then.
 */
forEachEngine('hw1 to hw2 migration racing a new record of the hw2 ID', (fixture) => {
  let db: Database;
  const context: OperationContext = { actor: 'test' };

  before(async () => {
    db = await fixture.freshDatabase();
  });

  it('neither fails: the move and the other admission end with one machine, the moved one', async function () {
    this.timeout(30_000);
    const customerId = (await createCustomer(db, { name: 'Racing Ltd' }, context)).id;
    const created = await createLicense(db, { customerId, type: 'time_based', validUntil: '2099-01-01' }, context);
    const license = await getLicense(db, created.id);
    const first = await db.transaction((tx) => admitMachine(tx, db.engine, license, { hardwareId: HW1 }, context));
    assert.ok(first.admitted);

    let other: Promise<unknown> | undefined;
    const held = (tx: Queryable): Queryable => new Proxy(tx, {
      get(target, property) {
        if (property !== 'execute') return Reflect.get(target, property);
        return async (sql: string, params?: unknown[]) => {
          if (sql.startsWith('UPDATE machines SET hardware_id') && !other) {
            // Another connection records the hw2 ID now (SQLite: it waits for the write lock).
            other = db.transaction((tx2) => admitMachine(tx2, db.engine, license, { hardwareId: HW2, offlineUntil: new Date(Date.now() + 86_400_000) }, context));
            await Promise.race([other.catch(() => undefined), new Promise((resolve) => setTimeout(resolve, 1500))]);
          }
          return (target.execute as (s: string, p?: unknown[]) => Promise<number>)(sql, params as never);
        };
      },
    });
    const moved = await db.transaction((tx) => migrateMachine(held(tx), db.engine, license.id, { hardwareId: HW2, previousHardwareId: HW1 }, context));
    assert.ok(other, 'the other admission ran while the move was held');
    const admitted = (await other) as Awaited<ReturnType<typeof admitMachine>>;
    assert.ok(admitted.admitted);
    const machines = await listMachines(db, { licenseId: license.id });
    assert.deepEqual(machines.map((machine) => machine.hardware_id), [HW2], 'one machine, with the new ID');
    assert.equal(String(moved?.id), first.admitted ? first.machine.id : '', 'the hw1 machine moved');
    assert.equal(admitted.machine.id, machines[0]!.id, 'the other admission found the moved machine');
  });
});
