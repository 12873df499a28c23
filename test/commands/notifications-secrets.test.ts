import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHmac } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { startReceiver } from '../support/receiver.js';

const docs = readFileSync(fileURLToPath(new URL('../../docs/notifications.md', import.meta.url)), 'utf8');

/** The settings document docs/notifications.md opens with. */
function documentedSettings(): { webhooks: Array<{ name: string; url: string; secret?: string }> } {
  const block = /```yaml\n(webhooks:[\s\S]*?)```/.exec(docs);
  assert.ok(block, 'docs/notifications.md shows a settings document');
  return parse(block[1]!);
}

/**
 * Issue 35, item 22: `notifications set` takes a literal webhook secret, as
 * docs/notifications.md ("Webhook secrets") says: stored as given, used for the signature,
 * shown as [redacted] everywhere but `show --reveal-secrets`.
 */
describe('a literal webhook secret, as docs/notifications.md documents it', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { env, cwd: work });

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-webhook-secret-'));
    env = { LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'), LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    ok(await cli('init'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('is documented: the example document gives one, and the section says how it is stored and shown', () => {
    const literal = documentedSettings().webhooks.find((hook) => hook.secret !== undefined && hook.secret !== '' && hook.secret !== '[redacted]');
    assert.ok(literal, 'the example settings document gives a webhook a secret of its own');
    const section = docs.slice(docs.indexOf('\n## Webhook secrets\n'), docs.indexOf('\n## Secrets in webhook URLs\n'));
    assert.ok(section.length > 30, 'docs/notifications.md has a section "Webhook secrets"');
    for (const claim of ['a literal secret', 'stored exactly as given', '`show --reveal-secrets`', '`[redacted]`', 'stored in clear in the database']) assert.ok(section.includes(claim), claim);
  });

  it('is stored as given, signs the deliveries, and is shown by nothing but show --reveal-secrets', async () => {
    const { name, secret } = documentedSettings().webhooks.find((hook) => hook.secret !== undefined && hook.secret !== '' && hook.secret !== '[redacted]')! as { name: string; secret: string };
    const receiver = await startReceiver();
    try {
      const file = path.join(work, 'n.yaml');
      writeFileSync(file, `webhooks:\n  - name: ${name}\n    url: ${receiver.url}\n    secret: "${secret}"\nrules:\n  - event: backup.*\n    webhook: ${name}\n`);
      const set = ok(await cli('notifications', 'set', '--file', file));
      const setJson = ok(await cli('notifications', 'set', '--file', file, '--json'));
      assert.deepEqual(setJson.json().generated_secrets, {}, 'nothing generated');
      const shown = ok(await cli('notifications', 'show'));
      const shownJson = ok(await cli('notifications', 'show', '--json'));
      assert.match(shown.stdout, /secret: "?\[redacted\]"?/);
      assert.equal(shownJson.json().webhooks[0].secret, '[redacted]');
      const audit = ok(await cli('audit', 'list', '--action', 'notifications.updated', '--json'));
      for (const [what, text] of [['set', set.stdout + set.stderr], ['set --json', setJson.stdout + setJson.stderr], ['show', shown.stdout], ['show --json', shownJson.stdout], ['the audit log', audit.stdout]] as const) {
        assert.ok(!text.includes(secret), `${what} shows the secret`);
      }
      assert.ok(ok(await cli('notifications', 'show', '--reveal-secrets')).stdout.includes(secret), 'show --reveal-secrets shows it');

      const db = await openDatabase(env.LICENSE_DATABASE_URL!);
      const stored = await db.query('SELECT secret FROM notification_webhooks WHERE name = ?', [name]).finally(() => db.close());
      assert.equal(stored[0]!.secret, secret, 'stored exactly as given');

      ok(await cli('notifications', 'test', '--webhook', name));
      const created = ok(await cli('backup', 'create', '--json')).json();
      assert.equal(receiver.received.length, 2);
      for (const request of receiver.received) {
        assert.equal(request.headers['x-license-server-signature'], `sha256=${createHmac('sha256', Buffer.from(secret, 'utf8')).update(request.body).digest('hex')}`);
      }
      const exported = execFileSync('tar', ['-xzOf', path.join(env.LICENSE_BACKUP_PATH!, created.file), 'notifications.json'], { encoding: 'utf8' });
      assert.ok(!exported.includes(secret), 'the backup\'s notifications.json shows it');
      assert.equal(JSON.parse(exported).webhooks[0].secret, '[redacted]');
    } finally {
      await receiver.close();
    }
  });
});
