import assert from 'node:assert/strict';
import { createCustomer } from '../../src/lib/customers.js';
import { createLicense } from '../../src/lib/licensing/licenses.js';
import { replaceNotificationSettings } from '../../src/lib/notifications/settings.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database } from '../../src/lib/storage/types.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver } from '../support/receiver.js';
import { startServe, type ServeProcess } from '../support/serve.js';

const DAY = 86_400_000;

forEachEngine('serve runs the license clock (issue 25)', (fixture) => {
  let serve: ServeProcess | undefined;
  let db: Database | undefined;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;

  before(async () => {
    receiver = await startReceiver();
  });
  after(async () => {
    if (serve) await serve.stop();
    await db?.close();
    await receiver?.close();
  });

  it('at start, a license 2 days from its end gets one expiring-soon reminder (the 7-day window), delivered to the webhook', async function () {
    this.timeout(60_000);
    const url = await fixture.freshUrl();
    db = await openDatabase(url);
    const context = { actor: 'test' };
    const customer = await createCustomer(db, { name: 'Initech', email: 'billing@initech.example' }, context);
    const license = await createLicense(db, { customerId: customer.id, type: 'time_based', validUntil: new Date(Date.now() + 2 * DAY) }, context);
    await replaceNotificationSettings(db, { webhooks: [{ name: 'crm', url: receiver.url, secret: 'test-secret' }], rules: [{ event: 'license.expiring_soon', webhook: 'crm' }] }, context);
    serve = await startServe({ LICENSE_DATABASE_URL: url, LICENSE_CLIENT_RATE_LIMIT: '0' });
    const reminders = () => receiver.received.filter((request) => request.headers['x-license-server-event'] === 'license.expiring_soon');
    await eventually(() => reminders().length > 0, 'the reminder reached the webhook', 30_000);
    const body = JSON.parse(reminders()[0]!.body);
    const data = body.data ?? body;
    assert.equal(data.license_id, license.id);
    assert.equal(data.window_days, 7);
    assert.equal(data.days_left, 2);
    const rows = await db.query('SELECT event FROM notification_deliveries WHERE event = ?', ['license.expiring_soon']);
    assert.equal(rows.length, 1, 'one reminder, not one per window');
    assert.equal((await serve.stop()).code, 0);
    serve = undefined;
  });
});
