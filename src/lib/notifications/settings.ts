import { randomBytes, randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { redactUrl, unredactUrl } from '../config/redact.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import type { Database, Queryable } from '../storage/types.js';
import { asBool } from '../storage/values.js';
import { describe } from '../validate.js';
import { checkLiteralAddress } from './address.js';
import { EVENTS, eventMatches } from './events.js';

export interface Webhook {
  readonly name: string;
  /** May carry credentials (user:password@, a query token): shown redacted, like the secret. */
  readonly url: string;
  /** Signs each delivery (HMAC-SHA256); shown only with --reveal-secrets. */
  readonly secret: string;
  readonly enabled: boolean;
}

export interface AlertRule {
  /** An event name, `backup.*`, or `*`. */
  readonly event: string;
  readonly webhook?: string;
  readonly email?: string;
  readonly enabled: boolean;
}

export interface EmailTemplate {
  readonly event: string;
  readonly subject: string;
  readonly body: string;
}

export interface NotificationSettings {
  readonly webhooks: readonly Webhook[];
  readonly rules: readonly AlertRule[];
  readonly email_templates: readonly EmailTemplate[];
}

export async function readNotificationSettings(db: Queryable): Promise<NotificationSettings> {
  // One after another: `db` may be a transaction's one PostgreSQL client, which must not be
  // handed a query while it runs another.
  const webhooks = await db.query('SELECT id, name, url, secret, enabled FROM notification_webhooks ORDER BY name');
  const rules = await db.query('SELECT r.event, r.email_to, r.enabled, w.name AS webhook FROM notification_alert_rules r LEFT JOIN notification_webhooks w ON w.id = r.webhook_id');
  const templates = await db.query('SELECT event, subject, body FROM notification_email_templates ORDER BY event');
  return {
    webhooks: webhooks.map((row) => ({ name: String(row.name), url: String(row.url), secret: String(row.secret), enabled: asBool(row.enabled) })),
    // Sorted here, by code point: rules saved together share one created_at, their ids are
    // random, and SQL collations and NULL order differ between the engines.
    rules: rules
      .map((row): AlertRule => ({
        event: String(row.event),
        ...(row.webhook === null || row.webhook === undefined ? {} : { webhook: String(row.webhook) }),
        ...(row.email_to === null ? {} : { email: String(row.email_to) }),
        enabled: asBool(row.enabled),
      }))
      .sort((a, b) => compareRules(a, b)),
    email_templates: templates.map((row) => ({ event: String(row.event), subject: String(row.subject), body: String(row.body) })),
  };
}

/**
 * Replaces every notification setting at once from a document (`notifications set --file`).
 * Everything is checked first; the replacement is one transaction. A webhook given without
 * a secret gets a random one (returned, so it can be shown once); one whose secret is the
 * redacted placeholder keeps its stored secret, and the redacted parts of its URL (`***`)
 * are taken from its stored URL. A URL naming a link-local address is refused unless
 * `allowLinkLocal` (notifications.allow_link_local).
 */
export async function replaceNotificationSettings(
  db: Database,
  input: unknown,
  context: OperationContext,
  options: { readonly allowLinkLocal?: boolean } = {},
): Promise<{ settings: NotificationSettings; generated: Record<string, string> }> {
  const parsed = parseSettings(input, options.allowLinkLocal ?? false);
  const generated: Record<string, string> = {};
  await db.transaction(async (tx) => {
    const current = await readNotificationSettings(tx);
    const at = now(context).toISOString();
    await tx.execute('DELETE FROM notification_alert_rules');
    await tx.execute('DELETE FROM notification_webhooks');
    await tx.execute('DELETE FROM notification_email_templates');
    const ids = new Map<string, string>();
    for (const [i, hook] of parsed.webhooks.entries()) {
      const stored = current.webhooks.find((candidate) => candidate.name === hook.name);
      let url: string;
      try {
        url = unredactUrl(hook.url, stored?.url);
      } catch (error) {
        throw new LicenseServerError('INVALID_INPUT', `notification settings: webhooks[${i}].url (webhook ${describe(hook.name)}): ${(error as Error).message}; give the whole URL`);
      }
      let secret = hook.secret;
      if (secret === '' || secret === undefined) {
        secret = randomBytes(24).toString('base64url');
        generated[hook.name] = secret;
      } else if (secret === REDACTED) {
        if (!stored) throw new LicenseServerError('INVALID_INPUT', `webhook ${describe(hook.name)} has no stored secret to keep; give one or leave it out`);
        secret = stored.secret;
      }
      const id = randomUUID();
      ids.set(hook.name, id);
      await tx.execute('INSERT INTO notification_webhooks (id, name, url, secret, enabled, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)', [
        id, hook.name, url, secret, hook.enabled, at, at,
      ]);
    }
    for (const rule of parsed.rules) {
      await tx.execute('INSERT INTO notification_alert_rules (id, event, webhook_id, email_to, enabled, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
        randomUUID(), rule.event, rule.webhook ? ids.get(rule.webhook)! : null, rule.email ?? null, rule.enabled, at,
      ]);
    }
    for (const template of parsed.email_templates) {
      await tx.execute('INSERT INTO notification_email_templates (event, subject, body, updated_at) VALUES (?, ?, ?, ?)', [template.event, template.subject, template.body, at]);
    }
    await recordAudit(tx, context, {
      action: 'notifications.updated',
      entityType: 'notifications',
      details: { webhooks: parsed.webhooks.map((hook) => hook.name), rules: parsed.rules.length, email_templates: parsed.email_templates.map((t) => t.event) },
    });
  });
  return { settings: await readNotificationSettings(db), generated };
}

export const REDACTED = '[redacted]';

/**
 * Settings as shown to people: secrets replaced by a placeholder, and URL credentials and
 * query strings by `***`, both of which `set` understands as "keep the stored one".
 */
export function redactSettings(settings: NotificationSettings): NotificationSettings {
  return { ...settings, webhooks: settings.webhooks.map((hook) => ({ ...hook, url: redactUrl(hook.url), secret: REDACTED })) };
}

function compareRules(a: AlertRule, b: AlertRule): number {
  const left = [a.event, a.webhook ?? '', a.email ?? ''];
  const right = [b.event, b.webhook ?? '', b.email ?? ''];
  const at = left.findIndex((part, i) => part !== right[i]);
  return at === -1 ? 0 : left[at]! < right[at]! ? -1 : 1;
}

function parseSettings(input: unknown, allowLinkLocal: boolean): { webhooks: Array<Webhook & { secret: string }>; rules: AlertRule[]; email_templates: EmailTemplate[] } {
  const invalid = (reason: string): never => {
    throw new LicenseServerError('INVALID_INPUT', `notification settings: ${reason}`);
  };
  if (typeof input !== 'object' || input === null || Array.isArray(input)) invalid('expected an object with webhooks, rules and email_templates');
  const document = input as Record<string, unknown>;
  for (const key of Object.keys(document)) if (!['webhooks', 'rules', 'email_templates'].includes(key)) invalid(`unknown key ${describe(key)}`);
  const list = (key: string) => {
    const value = document[key] ?? [];
    if (!Array.isArray(value)) invalid(`${key} must be a list`);
    return value as Array<Record<string, unknown>>;
  };
  const text = (value: unknown, what: string, max = 2000): string => {
    if (typeof value !== 'string' || value.length === 0 || value.length > max) invalid(`${what} must be a non-empty string of at most ${max} characters`);
    return value as string;
  };
  const names = new Set<string>();
  const webhooks = list('webhooks').map((hook, i) => {
    const name = text(hook.name, `webhooks[${i}].name`, 100);
    if (names.has(name)) invalid(`webhook ${describe(name)} is given twice`);
    names.add(name);
    const url = text(hook.url, `webhooks[${i}].url`);
    let parsed: URL | undefined;
    try {
      parsed = new URL(url);
    } catch {
      parsed = undefined;
    }
    if (!parsed || !['http:', 'https:'].includes(parsed.protocol)) invalid(`webhooks[${i}].url must be an http or https URL`);
    if (!allowLinkLocal) checkLiteralAddress(parsed!, `notification settings: webhooks[${i}].url points at`);
    if (hook.secret !== undefined && typeof hook.secret !== 'string') invalid(`webhooks[${i}].secret must be a string`);
    return { name, url, secret: (hook.secret as string | undefined) ?? '', enabled: hook.enabled === undefined ? true : Boolean(hook.enabled) };
  });
  const eventPattern = (value: unknown, what: string) => {
    const pattern = text(value, what, 100);
    if (!(pattern === '*' || (EVENTS as readonly string[]).includes(pattern) || (pattern.endsWith('.*') && EVENTS.some((event) => eventMatches(pattern, event))))) {
      invalid(`${what} ${describe(pattern)} matches no event (events: ${EVENTS.join(', ')})`);
    }
    return pattern;
  };
  const rules = list('rules').map((rule, i) => {
    const event = eventPattern(rule.event, `rules[${i}].event`);
    const webhook = rule.webhook === undefined ? undefined : text(rule.webhook, `rules[${i}].webhook`, 100);
    if (webhook !== undefined && !names.has(webhook)) invalid(`rules[${i}] names webhook ${describe(webhook)}, which is not defined`);
    const email = rule.email === undefined ? undefined : text(rule.email, `rules[${i}].email`, 320);
    if (email !== undefined && email !== 'customer' && !/^[^\s@,;<>"]+@[^\s@,;<>"]+$/.test(email)) invalid(`rules[${i}].email is not an email address (nor "customer", the event's own customer)`);
    if (!webhook && !email) invalid(`rules[${i}] needs a webhook or an email`);
    return { event, ...(webhook ? { webhook } : {}), ...(email ? { email } : {}), enabled: rule.enabled === undefined ? true : Boolean(rule.enabled) };
  });
  const templates = list('email_templates').map((template, i) => ({
    event: eventPattern(template.event, `email_templates[${i}].event`),
    subject: text(template.subject, `email_templates[${i}].subject`, 300),
    body: text(template.body, `email_templates[${i}].body`, 20_000),
  }));
  return { webhooks, rules, email_templates: templates };
}

