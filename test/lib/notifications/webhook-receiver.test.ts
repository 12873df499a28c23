import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { signBody } from '../../../src/lib/notifications/notifier.js';
import { raiseEvent } from '../../../src/lib/notifications/outbox.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import type { Database } from '../../../src/lib/storage/types.js';
import { testDeliverer } from '../../support/outbox-rows.js';

const root = fileURLToPath(new URL('../../../', import.meta.url));
const example = path.join(root, 'examples', 'webhook-receiver.mjs');

describe('webhook signatures', () => {
  it('match the vector file, which independent receivers are checked against', () => {
    const vectors = JSON.parse(readFileSync(path.join(root, 'test', 'vectors', 'webhook-signature.json'), 'utf8')) as { cases: Array<{ name: string; secret: string; body: string; signature: string }> };
    assert.ok(vectors.cases.length >= 3);
    for (const vector of vectors.cases) assert.equal(signBody(vector.secret, vector.body), vector.signature, vector.name);
    assert.notEqual(vectors.cases[0]!.signature, vectors.cases[2]!.signature);
  });

  it('docs/notifications.md shows examples/webhook-receiver.mjs as it is', () => {
    const docs = readFileSync(path.join(root, 'docs', 'notifications.md'), 'utf8');
    assert.ok(docs.includes(`\`\`\`js\n${readFileSync(example, 'utf8')}\`\`\``), 'the example in the docs differs from examples/webhook-receiver.mjs');
  });

  describe('the example receiver, fed by the deliverer', function () {
    this.timeout(30_000);
    const secret = 'example-receiver-secret-0123456789';
    let work: string;
    let db: Database;
    let receiver: ChildProcess;
    let url: string;
    let logged: string[];

    before(async () => {
      work = mkdtempSync(path.join(tmpdir(), 'license-receiver-'));
      db = await openDatabase(path.join(work, 'db.sqlite'));
      receiver = spawn(process.execPath, [example, '0'], { env: { ...process.env, WEBHOOK_SECRET: secret }, stdio: ['ignore', 'pipe', 'pipe'] });
      logged = [];
      let out = '';
      receiver.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
        const lines = out.split('\n');
        out = lines.pop()!;
        logged.push(...lines);
      });
      const port = await new Promise<string>((resolve, reject) => {
        let err = '';
        receiver.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
          err += chunk;
          const found = /listening on port (\d+)/.exec(err);
          if (found) resolve(found[1]!);
        });
        receiver.once('exit', (code) => reject(new Error(`the example exited ${code}: ${err}`)));
      });
      url = `http://127.0.0.1:${port}/hooks/license-server`;
    });
    after(async () => {
      receiver.kill();
      await db.close();
      rmSync(work, { recursive: true, force: true });
    });

    it('accepts signed deliveries, handles a redelivered one once, and refuses a wrong signature', async () => {
      await replaceNotificationSettings(db, { webhooks: [{ name: 'example', url, secret }], rules: [{ event: '*', webhook: 'example' }] }, { actor: 'test' });
      const deliverer = testDeliverer(db);
      const [first] = await db.transaction((tx) => raiseEvent(tx, 'backup.succeeded', { backup_id: 'b1', customer_name: 'Zoë' }));
      await db.transaction((tx) => raiseEvent(tx, 'backup.failed', { error: 'disk full' }));
      assert.deepEqual((await deliverer.deliverDue()).map((outcome) => outcome.status), ['delivered', 'delivered']);
      await db.execute("UPDATE notification_deliveries SET status = 'pending' WHERE id = ?", [first!]);
      assert.deepEqual((await deliverer.deliverDue()).map((outcome) => [outcome.id, outcome.status]), [[first, 'delivered']], 'a repeat is answered 2xx');
      const wrong = await fetch(url, { method: 'POST', body: '{"event":"backup.failed"}', headers: { 'x-license-server-signature': signBody('another-secret', '{"event":"backup.failed"}'), 'x-license-server-delivery': 'forged' } });
      assert.equal(wrong.status, 401);
      await new Promise((resolve) => setTimeout(resolve, 200));
      const handled = logged.map((line) => JSON.parse(line) as { delivery: string; event: string; data: Record<string, unknown> });
      assert.deepEqual(handled.map((entry) => entry.event).sort(), ['backup.failed', 'backup.succeeded'], 'each delivery handled once');
      assert.equal(handled.find((entry) => entry.delivery === first)?.data.customer_name, 'Zoë');
    });
  });
});
