import { readFile } from 'node:fs/promises';
import type { Document } from 'yaml';
import { redactDatabaseUrl, redactUrl } from '../config/redact.js';
import type { Database } from '../storage/types.js';
import { REDACTED } from '../notifications/settings.js';
import { asBool, asIso } from '../storage/values.js';

/** Keys of config.yaml that never go into a backup: they are secrets kept apart from it. */
export const SECRET_KEYS = [['backup', 'encryption_key'], ['signing', 'key_encryption_key'], ['admin_token']] as const;

const DATABASE_URL = ['database', 'url'] as const;

/**
 * The configuration file as it goes into a backup: the backup key, the signing keys'
 * key-encryption key and the admin token removed, a database password redacted, comments and layout kept. A file with nothing to
 * remove (no such keys, an empty or comment-only file) goes in byte for byte.
 */
export async function sanitizedConfigFile(file: string): Promise<Buffer> {
  const original = await readFile(file);
  const doc = await parse(original.toString('utf8'));
  let changed = false;
  for (const keyPath of SECRET_KEYS) changed = (await deletePath(doc, keyPath)) || changed;
  const url = doc.getIn(DATABASE_URL);
  if (typeof url === 'string' && redactDatabaseUrl(url) !== url) {
    doc.setIn(DATABASE_URL, redactDatabaseUrl(url));
    changed = true;
  }
  return changed ? Buffer.from(doc.toString(), 'utf8') : original;
}

/**
 * A restored config.yaml keeps this host's secrets: the backup key and admin token of the
 * file it replaces (they were never in the backup), and this host's database.url. The
 * restore wrote the data where that URL points, so the backed-up host's URL (another
 * database, the other engine's, or a redacted one that could never connect) must not replace
 * it; when the replaced file named none, the restored one names none either, and
 * database.url keeps coming from the environment or the default. With nothing to put back,
 * the restored file is written byte for byte.
 */
export async function mergeRestoredConfig(restored: Buffer, current: string | undefined): Promise<Buffer> {
  const doc = await parse(restored.toString('utf8'));
  const existing = await parse(current ?? '');
  let changed = false;
  for (const keyPath of SECRET_KEYS) {
    const value = existing.getIn(keyPath);
    if (value !== undefined && value !== null) {
      await setPath(doc, keyPath, value);
      changed = true;
    }
  }
  const url = doc.getIn(DATABASE_URL);
  const own = existing.getIn(DATABASE_URL);
  if (typeof own === 'string') {
    if (url !== own) {
      doc.setIn(DATABASE_URL, own);
      changed = true;
    }
  } else if (doc.hasIn(DATABASE_URL)) {
    await deletePath(doc, DATABASE_URL);
    changed = true;
  }
  return changed ? Buffer.from(doc.toString(), 'utf8') : restored;
}

async function parse(text: string): Promise<Document> {
  const { parseDocument } = await import('yaml');
  return parseDocument(text);
}

/**
 * Removes one key, if it is there (yaml's deleteIn throws on a path through a missing or
 * empty section). The comment above the removed line is about what follows it as often as
 * about the key itself (a file's heading sits above its first key), so it moves to the next
 * key instead of going with the removed one.
 */
async function deletePath(doc: Document, keyPath: readonly string[]): Promise<boolean> {
  if (!doc.hasIn(keyPath)) return false;
  const { isMap, isNode } = await import('yaml');
  const parent = keyPath.length > 1 ? doc.getIn(keyPath.slice(0, -1), true) : doc.contents;
  const key = keyPath[keyPath.length - 1];
  if (isMap(parent)) {
    const index = parent.items.findIndex((pair) => (isNode(pair.key) ? (pair.key as { value?: unknown }).value : pair.key) === key);
    const removed = parent.items[index];
    const comment = removed && isNode(removed.key) ? removed.key.commentBefore : undefined;
    if (comment) {
      const next = parent.items[index + 1];
      if (next && isNode(next.key)) next.key.commentBefore = next.key.commentBefore ? `${comment}\n${next.key.commentBefore}` : comment;
      else parent.comment = parent.comment ? `${comment}\n${parent.comment}` : comment;
    }
  }
  doc.deleteIn(keyPath);
  // An emptied section is written as `backup:` again, not as yaml's `backup: {}`.
  if (keyPath.length > 1 && isMap(parent) && parent.items.length === 0) {
    const { Scalar } = await import('yaml');
    const empty = new Scalar(null);
    empty.source = ''; // as parsed from `backup:`, so it is written back the same way
    empty.comment = [parent.commentBefore, parent.comment].filter(Boolean).join('\n') || undefined;
    doc.setIn(keyPath.slice(0, -1), empty);
  }
  return true;
}

/**
 * setIn that also fills an empty document (`~`, `---`) and an empty section (`backup:`),
 * which yaml holds as null scalars and refuses to descend into. A comment on the empty
 * section moves above the first key of the mapping that replaces it.
 */
async function setPath(doc: Document, keyPath: readonly string[], value: unknown): Promise<void> {
  const { isNode, isScalar } = await import('yaml');
  if (isScalar(doc.contents) && doc.contents.value === null) doc.contents = null;
  const [section, ...rest] = keyPath;
  const node = rest.length > 0 ? doc.getIn([section], true) : undefined;
  if (isScalar(node) && node.value === null) {
    const replacement = doc.createNode(Object.fromEntries([[rest.join('.'), value]]));
    const first = replacement.items[0];
    const comment = [node.commentBefore, node.comment].filter(Boolean).join('\n');
    if (comment && first && isNode(first.key)) first.key.commentBefore = comment;
    doc.setIn([section], replacement);
    return;
  }
  doc.setIn(keyPath, value);
}

/**
 * Email templates, webhooks and alert rules as readable JSON (docs/backup-format.md), the
 * same on both engines: ids as strings, booleans as booleans, timestamps as
 * `YYYY-MM-DDTHH:MM:SS.sssZ`, lists sorted here by code point rather than by SQL, whose
 * collation and NULL order differ between engines (and rules saved together share one
 * created_at). Webhook secrets and URL credentials are redacted as `notifications show`
 * redacts them: this is the copy people open and paste; the database entry beside it still
 * holds them, which is why backups should be encrypted.
 */
export async function exportNotifications(db: Database): Promise<Buffer> {
  const [templates, webhooks, rules] = await Promise.all([
    db.query('SELECT event, subject, body, updated_at FROM notification_email_templates'),
    db.query('SELECT id, name, url, secret, enabled, created_at, updated_at FROM notification_webhooks'),
    db.query('SELECT id, event, webhook_id, email_to, enabled, created_at FROM notification_alert_rules'),
  ]);
  const textOrNull = (value: unknown) => (value === null || value === undefined ? null : String(value));
  const byKeys = <T>(keys: (item: T) => string[]) => (a: T, b: T) => {
    const [left, right] = [keys(a), keys(b)];
    const at = left.findIndex((key, i) => key !== right[i]);
    return at === -1 ? 0 : left[at]! < right[at]! ? -1 : 1;
  };
  const hookNames = new Map(webhooks.map((row) => [String(row.id), String(row.name)]));
  const document = {
    email_templates: templates
      .map((row) => ({ event: String(row.event), subject: String(row.subject), body: String(row.body), updated_at: asIso(row.updated_at) }))
      .sort(byKeys((template) => [template.event])),
    webhooks: webhooks.map((row) => ({
      id: String(row.id),
      name: String(row.name),
      url: redactUrl(String(row.url)),
      secret: REDACTED,
      enabled: asBool(row.enabled),
      created_at: asIso(row.created_at),
      updated_at: asIso(row.updated_at),
    })).sort(byKeys((hook) => [hook.name])),
    alert_rules: rules.map((row) => ({
      id: String(row.id),
      event: String(row.event),
      webhook_id: textOrNull(row.webhook_id),
      email_to: textOrNull(row.email_to),
      enabled: asBool(row.enabled),
      created_at: asIso(row.created_at),
    })).sort(byKeys((rule) => [rule.created_at, rule.event, hookNames.get(rule.webhook_id ?? '') ?? '', rule.email_to ?? '', rule.id])),
  };
  return Buffer.from(`${JSON.stringify(document, null, 2)}\n`, 'utf8');
}
