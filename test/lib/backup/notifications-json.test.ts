import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBackup } from '../../../src/lib/backup/create.js';
import { resolveConfig } from '../../../src/lib/config/resolve.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import { openDatabase } from '../../../src/lib/storage/open.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../../support/postgres.js';

const SETTINGS = {
  webhooks: [
    { name: 'ops', url: 'https://ops:url-password-0123@hooks.example.com/license?token=query-secret-0123', secret: 'webhook-secret-0123456789' },
    // Upper case sorts before lower case by code point, after it in most PostgreSQL collations.
    { name: 'Paused', url: 'https://paused.example.com/hook', secret: 'paused-secret-0123456789', enabled: false },
  ],
  rules: [
    { event: 'backup.*', webhook: 'ops' },
    { event: 'backup.failed', email: 'ops@example.com' },
    { event: '*', webhook: 'Paused', enabled: false },
  ],
  email_templates: [{ event: 'backup.failed', subject: 'Backup failed on {{server}}', body: '{{error}}' }],
};

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Ids and times differ from one store to the next; everything else must not. */
function withoutIdsAndTimes(document: unknown): unknown {
  return JSON.parse(JSON.stringify(document, (key, value: unknown) => (['id', 'webhook_id', 'created_at', 'updated_at'].includes(key) && typeof value === 'string' ? '<varies>' : value)));
}

describe('notifications.json in a backup', function () {
  this.timeout(120_000);
  let work: string;
  let postgresUrl: string | undefined;

  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-notifications-json-'));
    postgresUrl = await createTestDatabase();
  });
  after(async () => {
    if (postgresUrl) await dropTestDatabase(postgresUrl);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  /** A real, unencrypted backup of a store holding SETTINGS; its notifications.json as tar gives it. */
  async function notificationsJsonOf(url: string, dir: string): Promise<string> {
    const db = await openDatabase(url);
    try {
      await replaceNotificationSettings(db, SETTINGS, { actor: 'test' });
      const config = await resolveConfig({ cwd: dir, env: { LICENSE_DATA_DIR: dir, LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(dir, 'backups') } });
      const record = await createBackup({ db, config, trigger: 'manual', toolVersion: '0.0.0-test', context: { actor: 'test' } });
      return execFileSync('tar', ['-xzOf', path.join(dir, 'backups', record.file), 'notifications.json'], { encoding: 'utf8' });
    } finally {
      await db.close();
    }
  }

  it('is the same on SQLite and PostgreSQL: booleans, ISO timestamps and string ids, secrets redacted', async () => {
    const sqlite = await notificationsJsonOf(path.join(work, 'sqlite', 'data', 'license-server.db'), path.join(work, 'sqlite'));
    const postgres = await notificationsJsonOf(postgresUrl!, path.join(work, 'postgres'));
    assert.deepEqual(withoutIdsAndTimes(JSON.parse(sqlite)), withoutIdsAndTimes(JSON.parse(postgres)));

    for (const [engine, text] of [['sqlite', sqlite], ['postgres', postgres]] as const) {
      const document = JSON.parse(text);
      assert.deepEqual(withoutIdsAndTimes(document), {
        email_templates: [{ event: 'backup.failed', subject: 'Backup failed on {{server}}', body: '{{error}}', updated_at: '<varies>' }],
        webhooks: [
          { id: '<varies>', name: 'Paused', url: 'https://paused.example.com/hook', secret: '[redacted]', enabled: false, created_at: '<varies>', updated_at: '<varies>' },
          { id: '<varies>', name: 'ops', url: 'https://ops:***@hooks.example.com/license?***', secret: '[redacted]', enabled: true, created_at: '<varies>', updated_at: '<varies>' },
        ],
        alert_rules: [
          { id: '<varies>', event: '*', webhook_id: '<varies>', email_to: null, enabled: false, created_at: '<varies>' },
          { id: '<varies>', event: 'backup.*', webhook_id: '<varies>', email_to: null, enabled: true, created_at: '<varies>' },
          { id: '<varies>', event: 'backup.failed', webhook_id: null, email_to: 'ops@example.com', enabled: true, created_at: '<varies>' },
        ],
      }, engine);
      const ids = new Map(document.webhooks.map((hook: { id: string; name: string }) => [hook.name, hook.id]));
      assert.deepEqual(document.alert_rules.map((rule: { webhook_id: string | null }) => rule.webhook_id), [ids.get('Paused'), ids.get('ops'), null], engine);
      for (const row of [...document.webhooks, ...document.alert_rules]) assert.match(row.id, UUID, engine);
      for (const row of [...document.email_templates, ...document.webhooks, ...document.alert_rules]) {
        for (const key of ['created_at', 'updated_at']) if (key in row) assert.match(row[key], ISO, `${engine} ${key}`);
      }
      for (const secret of ['webhook-secret', 'paused-secret', 'url-password', 'query-secret']) assert.ok(!text.includes(secret), `${engine}: ${secret}`);
    }
  });
});
