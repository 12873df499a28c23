import assert from 'node:assert/strict';
import { createCustomer } from '../../../src/lib/customers.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { createLicense } from '../../../src/lib/licensing/licenses.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import type { Database, Queryable } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

/** `db` with every statement it runs (inside transactions too) written down, in order. */
function counting(db: Database): { db: Database; statements: string[] } {
  const statements: string[] = [];
  const wrap = (inner: Queryable): Queryable => ({
    query: (sql, params) => (statements.push(sql.replace(/\s+/g, ' ').trim()), inner.query(sql, params)),
    execute: (sql, params) => (statements.push(sql.replace(/\s+/g, ' ').trim()), inner.execute(sql, params)),
  });
  const plain = wrap(db);
  return {
    statements,
    db: {
      engine: db.engine,
      location: db.location,
      query: plain.query,
      execute: plain.execute,
      transaction: (fn, options) => db.transaction((tx) => fn(wrap(tx)), options),
      close: () => db.close(),
    },
  };
}

/**
 * Raising an event costs about one insert (issue 35: rules cut API license creation from 216/s
 * to 57/s): the rules are read with the statement that finds whether any applies, which runs
 * with or without rules, and the deliveries go in with one INSERT however many targets there
 * are. Counted in statements, not timed, so a busy machine cannot make it pass or fail.
 */
forEachEngine('what raising an event costs a license creation', (fixture) => {
  let db: Database;
  const context = { actor: 'test' };
  let customerId: string;

  before(async () => {
    db = await fixture.freshDatabase();
    customerId = (await createCustomer(db, { name: 'Acme', email: 'buyer@acme.test' }, context)).id;
    await createEntitlement(db, { code: 'export', name: 'Export' }, context);
  });

  const create = async () => {
    const counted = counting(db);
    await createLicense(counted.db, { customerId, type: 'time_based', validUntil: '2099-01-01', maxMachines: 3, entitlements: [{ code: 'export', usageLimit: null }] }, context);
    return counted.statements;
  };
  const outbox = async () => Number((await db.query('SELECT count(*) AS n FROM notification_deliveries'))[0]!.n);

  it('costs one INSERT more with rules that select license.created than with no rules at all', async () => {
    await replaceNotificationSettings(db, {}, context);
    await create();
    const without = await create();
    assert.equal(await outbox(), 0);

    await replaceNotificationSettings(db, {
      webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/ops' }, { name: 'crm', url: 'http://127.0.0.1:9/crm' }, { name: 'off', url: 'http://127.0.0.1:9/off', enabled: false }],
      rules: [
        { event: 'license.*', webhook: 'ops' },
        { event: 'license.created', webhook: 'crm' },
        { event: '*', webhook: 'off' },
        { event: 'license.created', email: 'customer' },
        { event: 'license.created', email: 'BUYER@acme.test' },
        { event: 'machine.limit_exceeded', email: 'sales@acme.test' },
        { event: 'license.expiring_soon', email: 'customer' },
        { event: 'backup.*', webhook: 'ops' },
        { event: 'backup.failed', email: 'ops@acme.test' },
      ],
      email_templates: [{ event: 'license.expiring_soon', subject: 'Expiring', body: '{{license_key_prefix}}' }],
    }, context);
    const before = await outbox();
    const withRules = await create();
    const extra = withRules.filter((sql, i) => sql !== without[i]);
    assert.equal(withRules.length, without.length + 1, `statements without rules:\n${without.join('\n')}\nwith rules:\n${withRules.join('\n')}`);
    assert.equal(extra.length, 1, extra.join('\n'));
    assert.match(extra[0]!, /^INSERT INTO notification_deliveries /);
    const rows = await db.query('SELECT channel, target, status FROM notification_deliveries ORDER BY channel, target');
    assert.equal((await outbox()) - before, 3);
    assert.deepEqual(rows.map((row) => `${row.channel}:${String(row.target).toLowerCase()}:${row.status}`), ['email:buyer@acme.test:pending', 'webhook:crm:pending', 'webhook:ops:pending'],
      'one delivery per target: the customer and a fixed address that is the same mailbox make one');
  });

  it('costs nothing more with rules for other events only', async () => {
    await replaceNotificationSettings(db, {}, context);
    const without = await create();
    await replaceNotificationSettings(db, {
      webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/ops' }],
      rules: [{ event: 'backup.*', webhook: 'ops' }, { event: 'license.expiring_soon', email: 'customer' }, { event: 'license.created', webhook: 'ops', enabled: false }],
    }, context);
    const before = await outbox();
    const withRules = await create();
    assert.deepEqual(withRules, without);
    assert.equal(await outbox(), before);
  });
});
