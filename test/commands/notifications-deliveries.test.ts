import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { raiseEvent } from '../../src/lib/notifications/outbox.js';
import type { EventName } from '../../src/lib/notifications/events.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { startReceiver } from '../support/receiver.js';

/**
 * `notifications deliveries`, `notifications delivery` and `notifications redeliver`, run as
 * an operator runs them against a store whose outbox holds deliveries to a real receiver.
 */
forEachEngine('notifications deliveries, delivery and redeliver on the command line', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let answers: number[];
  const cli = (...args: string[]) => runCli(args, { env, cwd: work });
  const raise = async (event: EventName, data: Record<string, unknown>) => {
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      return (await db.transaction((tx) => raiseEvent(tx, event, data)))[0]!;
    } finally {
      await db.close();
    }
  };
  const sentWith = (id: string) => receiver.received.filter((request) => request.headers['x-license-server-delivery'] === id);

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-deliveries-'));
    answers = [];
    receiver = await startReceiver(() => answers.shift() ?? 200);
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    ok(await cli('init'));
    writeFileSync(path.join(work, 'n.yaml'), `webhooks:\n  - name: ops\n    url: ${receiver.url}\n    secret: a-secret-of-the-webhook\nrules:\n  - event: "*"\n    webhook: ops\n`);
    ok(await cli('notifications', 'set', '--file', path.join(work, 'n.yaml')));
  });
  after(async () => {
    await receiver?.close();
    rmSync(work, { recursive: true, force: true });
  });

  let failing: string;
  let older: string;

  it('lists deliveries newest first as a table, filtered by status and event, a page at a time', async () => {
    older = await raise('license.created', { license_id: randomUUID() });
    failing = await raise('backup.failed', { error: 'disk full' });
    // Nothing delivers them here (no daemon, and the raising process sent nothing): both pending.
    const table = ok(await cli('notifications', 'deliveries')).stdout.split('\n');
    assert.match(table[0]!, /^ID +EVENT +TARGET +STATUS +ATTEMPTS +LAST +WHEN$/);
    assert.match(table[1]!, new RegExp(`^${failing} +backup\\.failed +webhook ops +pending +0 +- +\\d{4}-\\d{2}-\\d{2}T[\\d:.]+Z$`));
    assert.match(table[2]!, new RegExp(`^${older} +license\\.created`));

    const json = ok(await cli('notifications', 'deliveries', '--event', 'backup.failed', '--json')).json();
    assert.deepEqual(json.map((d: { id: string }) => d.id), [failing]);
    assert.deepEqual(json[0].data, { error: 'disk full' });
    assert.deepEqual(ok(await cli('notifications', 'deliveries', '--failed', '--json')).json(), []);
    assert.equal(ok(await cli('notifications', 'deliveries', '--delivered')).stdout, '(none)\n');

    const first = ok(await cli('notifications', 'deliveries', '--pending', '--limit', '1', '--json'));
    assert.deepEqual(first.json().map((d: { id: string }) => d.id), [failing]);
    const cursor = /^next page: --cursor (\S+)$/m.exec(first.stderr)?.[1];
    assert.ok(cursor, first.stderr);
    const second = ok(await cli('notifications', 'deliveries', '--pending', '--limit', '1', '--cursor', cursor!, '--json'));
    assert.deepEqual(second.json().map((d: { id: string }) => d.id), [older]);
    assert.doesNotMatch(second.stderr, /next page/);
    const mismatched = await cli('notifications', 'deliveries', '--failed', '--cursor', cursor!);
    assert.equal(mismatched.code, 2, mismatched.stderr);
    assert.match(mismatched.stderr, /other filters/);
    const both = await cli('notifications', 'deliveries', '--failed', '--pending');
    assert.equal(both.code, 2, both.stderr);
  });

  it('shows one delivery with its data; an unknown id exits 4 with DELIVERY_NOT_FOUND', async () => {
    const shown = ok(await cli('notifications', 'delivery', failing)).stdout;
    assert.match(shown, new RegExp(`^id: +${failing}$`, 'm'));
    assert.match(shown, /^target: +webhook ops$/m);
    assert.match(shown, /^status: +pending$/m);
    assert.match(shown, /^data:\n\{\n {2}"error": "disk full"\n\}$/m);
    const missing = await cli('notifications', 'delivery', randomUUID());
    assert.equal(missing.code, 4);
    assert.match(missing.stderr, /DELIVERY_NOT_FOUND/);
    const malformed = await cli('notifications', 'redeliver', 'not-an-id');
    assert.equal(malformed.code, 2);
    assert.match(malformed.stderr, /INVALID_ID/);
  });

  it('cuts a long error short in the table and shows it whole for one delivery', async () => {
    const error = `550 5.1.1 <ops@example.com>: Recipient address rejected: ${'x'.repeat(200)}`;
    const id = await raise('backup.succeeded', { backup_id: 'b-2' });
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      await db.execute(`UPDATE notification_deliveries SET status = 'failed', attempts = 1, last_error = ? WHERE id = ?`, [error, id]);
    } finally {
      await db.close();
    }
    const row = ok(await cli('notifications', 'deliveries', '--failed')).stdout.split('\n')[1]!;
    assert.ok(row.includes(`${error.slice(0, 59)}… `), row);
    assert.ok(!row.includes(error));
    assert.match(ok(await cli('notifications', 'delivery', id)).stdout, new RegExp(`^last outcome: ${error}$`, 'm'));
  });

  it('redeliver makes one attempt now and says what came of it: pending after a 500, delivered after a 200, under the same id', async () => {
    answers.push(500);
    const pending = ok(await cli('notifications', 'redeliver', failing));
    assert.match(pending.stdout, new RegExp(`^redelivered ${failing}: backup\\.failed to webhook ops is pending \\(HTTP 500\\); it will be retried from \\S+Z by \`serve\` or the next command\\n$`));
    assert.equal(sentWith(failing).length, 1);

    const delivered = ok(await cli('notifications', 'redeliver', failing, '--json')).json();
    assert.equal(delivered.id, failing);
    assert.equal(delivered.status, 'delivered');
    assert.equal(delivered.attempts, 2);
    assert.equal(sentWith(failing).length, 2);
    assert.equal(JSON.parse(sentWith(failing)[1]!.body).event, 'backup.failed');

    const again = ok(await cli('notifications', 'redeliver', failing));
    assert.equal(again.stdout, `redelivered ${failing}: backup.failed to webhook ops delivered (attempt 3)\n`);
    assert.equal(sentWith(failing).length, 3, 'a delivered delivery is sent again when asked');
    const audit = ok(await cli('audit', 'list', '--action', 'notification.redelivered', '--entity-id', failing, '--json')).json();
    assert.deepEqual(audit.map((entry: { details: { previous_status: string } }) => entry.details.previous_status), ['delivered', 'pending', 'pending']);
  });

  it('redeliver refuses a delivery whose webhook is gone (exit 6, DELIVERY_TARGET_GONE) and sends nothing', async () => {
    writeFileSync(path.join(work, 'none.yaml'), 'webhooks: []\nrules: []\n');
    ok(await cli('notifications', 'set', '--file', path.join(work, 'none.yaml')));
    const before = receiver.received.length;
    const refused = await cli('notifications', 'redeliver', older);
    assert.equal(refused.code, 6, refused.stderr);
    assert.match(refused.stderr, /webhook "ops" is no longer defined \(DELIVERY_TARGET_GONE\)/);
    assert.equal(receiver.received.length, before);
    assert.equal(ok(await cli('notifications', 'delivery', older, '--json')).json().attempts, 0);
  });
});
