import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { startReceiver, type Answer } from '../support/receiver.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The outbox across a daemon's death: deliveries pending when `serve` is SIGKILLed, in the
 * middle of an attempt or waiting for a retry, are delivered after it restarts, and each is
 * acknowledged by the receiver exactly once.
 */
forEachEngine('notifications pending when the daemon is SIGKILLed', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  let mode: Answer = 200;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  /** Delivery ids of the requests the receiver answered 2xx, in order. */
  const acknowledged: string[] = [];
  let serve: ServeProcess | undefined;

  before(async function () {
    this.timeout(60_000);
    work = mkdtempSync(path.join(tmpdir(), 'license-outbox-kill-'));
    env = {
      LICENSE_DATABASE_URL: await fixture.freshUrl(),
      LICENSE_DATA_DIR: path.join(work, 'data'),
      // A retry a second after a failure, so that the restarted daemon's work is seen at once.
      LICENSE_NOTIFICATIONS_RETRY_FIRST_DELAY: '1',
    };
    receiver = await startReceiver((count) => {
      const answer = mode;
      if (answer === 200) acknowledged.push(String(receiver.received[count - 1]!.headers['x-license-server-delivery']));
      return answer;
    });
    ok(await runCli(['init'], { env, cwd: work }));
    writeFileSync(path.join(work, 'n.json'), JSON.stringify({ webhooks: [{ name: 'hook', url: receiver.url, secret: 'kill-secret-0123456789' }], rules: [{ event: 'license.checked_out', webhook: 'hook' }] }));
    ok(await runCli(['notifications', 'set', '--file', path.join(work, 'n.json')], { env, cwd: work }));
  });
  after(async () => {
    await serve?.stop('SIGKILL');
    await receiver.close();
    rmSync(work, { recursive: true, force: true });
  });

  const checkOut = async (count: number): Promise<void> => {
    const token = serve!.token ?? ok(await runCli(['token', 'create', '--name', `t${Date.now()}`, '--json'], { env, cwd: work })).json().token;
    const customer = (await api(serve!.url, 'POST', '/api/customers', { token, body: { name: 'Killed' } })).body;
    const license = (await api(serve!.url, 'POST', '/api/licenses', { token, body: { customer_id: customer.id, type: 'time_based', valid_until: '2099-01-01' } })).body;
    for (let i = 0; i < count; i += 1) assert.equal((await api(serve!.url, 'POST', `/api/licenses/${license.id}/checkout`, { token, body: { ttl_days: 3 } })).status, 200);
  };
  const outbox = async () => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      return await db.query<{ id: string; status: string; attempts: number; claimed_by: string | null }>('SELECT id, status, attempts, claimed_by FROM notification_deliveries ORDER BY created_at, id');
    } finally {
      await db.close();
    }
  };

  /** The receiver back to 200, a new daemon: every delivery of `ids` acknowledged once, even a poll later. */
  const restartAndExpectEachOnce = async (ids: readonly string[]): Promise<void> => {
    mode = 200;
    serve = await startServe(env);
    await eventually(async () => (await outbox()).every((row) => row.status === 'delivered'), 'the restarted daemon delivered them', 20_000);
    await new Promise((resolve) => setTimeout(resolve, 2500));
    assert.deepEqual([...acknowledged].sort(), [...ids].sort(), 'each acknowledged exactly once');
    await serve.stop();
    serve = undefined;
  };

  it('delivers after a restart, once each, what the killed daemon was sending', async function () {
    this.timeout(60_000);
    mode = 'hang';
    serve = await startServe(env);
    await checkOut(4);
    await eventually(() => receiver.received.length === 4, 'the daemon sent the four deliveries, which hang');
    await serve.stop('SIGKILL');
    const killed = await outbox();
    assert.ok(killed.every((row) => row.status === 'pending'));
    // Attempts that hang past the 5 s timeout end and are recorded; those cut by the kill are not.
    assert.ok(killed.some((row) => row.claimed_by !== null), 'the dead daemon still holds claims of attempts it never finished');

    await restartAndExpectEachOnce(killed.map((row) => row.id));
  });

  it('delivers after a restart, once each, what the killed daemon was waiting to retry', async function () {
    this.timeout(60_000);
    acknowledged.length = 0;
    const before = new Set((await outbox()).map((row) => row.id));
    mode = 503;
    serve = await startServe(env);
    await checkOut(3);
    await eventually(async () => (await outbox()).filter((row) => !before.has(row.id) && row.attempts >= 1).length === 3, 'three deliveries failed at least once', 20_000);
    await serve.stop('SIGKILL');
    const killed = (await outbox()).filter((row) => !before.has(row.id));
    assert.ok(killed.every((row) => row.status === 'pending'));

    await restartAndExpectEachOnce(killed.map((row) => row.id));
  });
});
