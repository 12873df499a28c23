import assert from 'node:assert/strict';
import { DaemonMetrics, type StoreSource } from '../../src/http/metrics.js';
import { createCustomer } from '../../src/lib/customers.js';
import { createLicense } from '../../src/lib/licensing/licenses.js';
import { validateOnline } from '../../src/lib/licensing/online-validation.js';
import { ensureSigningKey } from '../../src/lib/signing-keys/keys.js';
import type { Database, Queryable } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';

/**
 * Issue 35 item 29: a scrape used to count seats over the whole machines table (seconds at
 * 1M machines, on every scrape). The store's figures are now read in the background, on the
 * admin database, and a scrape only renders the newest read: these tests watch every
 * statement the metrics send to the database they are given.
 */

function valueOf(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

/** `db` with every statement it runs, inside transactions too, appended to `seen`. */
function watched(db: Database, seen: string[]): Database {
  const queryable = (target: Queryable): Queryable => ({
    query: (sql, params) => (seen.push(sql), target.query(sql, params)),
    execute: (sql, params) => (seen.push(sql), target.execute(sql, params)),
  });
  return new Proxy(db, {
    get(target, property) {
      if (property === 'query' || property === 'execute') return queryable(target)[property];
      if (property === 'transaction') return (fn: (tx: Queryable) => Promise<unknown>, options?: object) => target.transaction((tx) => fn(queryable(tx)), options);
      const value = Reflect.get(target, property, target) as unknown;
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

async function until<T>(probe: () => Promise<T | undefined>): Promise<T> {
  // Bounded by the suite's timeout: the background read is a few statements on a small store.
  for (;;) {
    const found = await probe();
    if (found !== undefined) return found;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

forEachEngine('metrics: the store\'s figures come from a background read, never from the scrape', (fixture) => {
  let db: Database;
  let licenseKey: string;
  const context = { actor: 'cli:test' };
  const online = { actor: 'client:127.0.0.1', issuer: 'licenses.example.com', graceHours: 72 };
  const metricsOf = (database: Database, refreshSeconds: number): DaemonMetrics => {
    const metrics = new DaemonMetrics();
    const source: StoreSource = { database: () => database, pools: () => [], targets: () => [], refreshSeconds: () => refreshSeconds, backupMaxAgeSeconds: () => undefined };
    metrics.watch(source);
    return metrics;
  };

  before(async () => {
    db = await fixture.freshDatabase();
    await ensureSigningKey(db, context);
    const customer = await createCustomer(db, { name: 'Initech' }, context);
    const license = await createLicense(db, { customerId: customer.id, type: 'hybrid', validUntil: '2099-12-31', maxMachines: 1 }, context);
    licenseKey = license.key;
    assert.equal((await validateOnline(db, { license_key: licenseKey, hardware_id: 'HW-1', version: '1.0.0' }, online)).valid, true);
  });

  it('answers 20 scrapes without one statement to the database, with the figures of the background read', async () => {
    const seen: string[] = [];
    // One read when watching starts, none after it for an hour: every statement below is a scrape's.
    const metrics = metricsOf(watched(db, seen), 3600);
    try {
      const first = await until(async () => {
        const text = await metrics.render();
        return valueOf(text, 'license_server_store_up') === 1 ? text : undefined;
      });
      assert.equal(valueOf(first, 'license_server_store_seats_in_use'), 1);
      assert.equal(valueOf(first, 'license_server_store_licenses_near_machine_limit'), 1);
      assert.ok(seen.some((sql) => /FROM machines/.test(sql)), `the background read counts the machines:\n${seen.join('\n')}`);

      seen.length = 0;
      let text = '';
      for (let i = 0; i < 20; i += 1) text = await metrics.render();
      assert.deepEqual(seen, [], `a scrape sent ${seen.length} statements to the database`);
      assert.equal(valueOf(text, 'license_server_store_up'), 1);
      assert.equal(valueOf(text, 'license_server_store_seats_in_use'), 1);
      assert.equal(valueOf(text, 'license_server_store_machines', 'state="active"'), 1);
    } finally {
      metrics.close();
    }
  });

  it('follows the store at the refresh interval, and says how old its figures are and how long the read took', async () => {
    const metrics = metricsOf(db, 1);
    try {
      await until(async () => (valueOf(await metrics.render(), 'license_server_store_seats_in_use') === 1 ? true : undefined));
      const unlimited = await createLicense(db, { customerId: (await createCustomer(db, { name: 'Hooli' }, context)).id, type: 'hybrid', validUntil: '2099-12-31' }, context);
      assert.equal((await validateOnline(db, { license_key: unlimited.key, hardware_id: 'HW-2', version: '1.0.0' }, online)).valid, true);
      const text = await until(async () => {
        const rendered = await metrics.render();
        return valueOf(rendered, 'license_server_store_seats_in_use') === 2 ? rendered : undefined;
      });
      const age = valueOf(text, 'license_server_store_figures_age_seconds');
      const duration = valueOf(text, 'license_server_store_read_duration_seconds');
      assert.ok(age !== undefined && age >= 0, `license_server_store_figures_age_seconds: ${age}`);
      assert.ok(duration !== undefined && duration > 0, `license_server_store_read_duration_seconds: ${duration}`);
      // The figures are as of their read's start: at most one interval (stretched by a slow read) and that read old.
      assert.ok(age <= Math.max(1, 20 * duration) + 2 * duration + 1, `figures ${age} s old, read in ${duration} s`);
    } finally {
      metrics.close();
    }
  });

  it('stops reading once closed', async () => {
    const seen: string[] = [];
    const metrics = metricsOf(watched(db, seen), 1);
    await until(async () => (valueOf(await metrics.render(), 'license_server_store_up') === 1 ? true : undefined));
    metrics.close();
    // A read under way when it closed may still finish; none starts after that.
    await new Promise((resolve) => setTimeout(resolve, 100));
    const after = seen.length;
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.equal(seen.length, after, seen.slice(after).join('\n'));
  });
});
