import { readFile } from 'node:fs/promises';
import { redactDatabaseUrl } from '../config/redact.js';
import type { Database } from '../storage/types.js';

/** Keys of config.yaml that never go into a backup: they are secrets kept apart from it. */
export const SECRET_KEYS = [['backup', 'encryption_key'], ['admin_token']] as const;

/**
 * The configuration file as it goes into a backup: the backup key and the admin token
 * removed, a database password redacted, comments and layout kept.
 */
export async function sanitizedConfigFile(file: string): Promise<Buffer> {
  const { parseDocument } = await import('yaml');
  const doc = parseDocument(await readFile(file, 'utf8'));
  for (const keyPath of SECRET_KEYS) doc.deleteIn(keyPath as unknown as string[]);
  const url = doc.getIn(['database', 'url']);
  if (typeof url === 'string') doc.setIn(['database', 'url'], redactDatabaseUrl(url));
  return Buffer.from(doc.toString(), 'utf8');
}

/**
 * A restored config.yaml keeps this host's secrets: the backup key and admin token of the
 * file it replaces (they were never in the backup), and its database URL when the backup's
 * had a redacted password.
 */
export async function mergeRestoredConfig(restored: Buffer, current: string | undefined): Promise<Buffer> {
  const { parseDocument } = await import('yaml');
  const doc = parseDocument(restored.toString('utf8'));
  if (current !== undefined) {
    const existing = parseDocument(current);
    for (const keyPath of SECRET_KEYS) {
      const value = existing.getIn(keyPath as unknown as string[]);
      if (value !== undefined) doc.setIn(keyPath as unknown as string[], value);
    }
    const url = doc.getIn(['database', 'url']);
    if (typeof url === 'string' && url.includes(':***@')) doc.setIn(['database', 'url'], existing.getIn(['database', 'url']));
  }
  return Buffer.from(doc.toString(), 'utf8');
}

/** Email templates, webhooks and alert rules as readable JSON (they are also in the database). */
export async function exportNotifications(db: Database): Promise<Buffer> {
  const [templates, webhooks, rules] = await Promise.all([
    db.query('SELECT event, subject, body, updated_at FROM notification_email_templates ORDER BY event'),
    db.query('SELECT id, name, url, secret, enabled, created_at, updated_at FROM notification_webhooks ORDER BY name'),
    db.query('SELECT id, event, webhook_id, email_to, enabled, created_at FROM notification_alert_rules ORDER BY created_at, id'),
  ]);
  return Buffer.from(`${JSON.stringify({ email_templates: templates, webhooks, alert_rules: rules }, null, 2)}\n`, 'utf8');
}
