import { createHmac, randomUUID } from 'node:crypto';
import { redactUrl } from '../config/redact.js';
import { isLicenseServerError } from '../errors.js';
import type { Queryable } from '../storage/types.js';
import { checkLiteralAddress, guardedLookup, systemResolver, type Resolver } from './address.js';
import { postOnce } from './post.js';
import { renderTemplate } from './render.js';
import { eventMatches, hasEnabledRuleFor, readNotificationSettings, type EventName, type Webhook } from './settings.js';

export interface NotificationEvent {
  readonly id: string;
  /** One of EVENTS, or `notification.test` from `notifications test`. */
  readonly event: string;
  readonly occurred_at: string;
  /** The server's `issuer` setting. */
  readonly server: string;
  readonly data: Record<string, unknown>;
}

export interface DeliveryResult {
  readonly webhook: string;
  readonly delivered: boolean;
  readonly attempts: number;
  readonly status?: number;
  readonly error?: string;
  /** An error code of the tool (WEBHOOK_ADDRESS_REFUSED) when it, not the receiver, refused. */
  readonly code?: string;
  /** Where a redirect pointed, credentials redacted; it was not followed. */
  readonly location?: string;
}

export interface NotifierOptions {
  readonly database: () => Queryable;
  readonly server: () => string;
  readonly log: (entry: Record<string, unknown>) => void;
  /** Waits between attempts: 1 s, 5 s, 25 s by default (tests pass shorter ones). */
  readonly retryDelaysMs?: readonly number[];
  readonly timeoutMs?: number;
  /**
   * The wait between attempts. The default's timer is unreferenced, so that retries never
   * keep a stopping daemon alive; a short-lived process that awaits deliveries must pass a
   * referenced one (src/cli/alert.ts), or Node, finding nothing else pending, abandons its
   * await mid-wait and exits 13.
   */
  readonly sleep?: (ms: number) => Promise<void>;
  /** notifications.allow_link_local: deliver to 169.254.0.0/16 and fe80::/10 too. */
  readonly allowLinkLocal?: () => boolean;
  /** Resolves webhook host names (the system resolver by default; tests pass their own). */
  readonly lookup?: Resolver;
}

export const SIGNATURE_HEADER = 'X-License-Server-Signature';

/** `sha256=` and the hex HMAC-SHA256 of the exact body bytes under the webhook's secret. */
export function signBody(secret: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/**
 * Sends events to the webhooks that alert rules select (docs/notifications.md). emit()
 * returns at once and never throws: delivery happens in the background with retries, is
 * logged, and a failing or hanging webhook never slows or fails the work that raised the
 * event. Email rules are rendered and logged; sending mail needs an SMTP server, which this
 * release does not configure.
 */
export class Notifier {
  private readonly pending = new Set<Promise<unknown>>();

  constructor(private readonly options: NotifierOptions) {}

  emit(event: EventName, data: Record<string, unknown>): void {
    const delivery = this.deliver(event, data).catch((error: unknown) =>
      this.options.log({ level: 'error', msg: 'notification failed', event, error: error instanceof Error ? error.message : String(error) }),
    );
    this.pending.add(delivery);
    void delivery.finally(() => this.pending.delete(delivery));
  }

  /** Waits for deliveries in flight, for at most `timeoutMs` (the daemon's shutdown, a test). */
  async settle(timeoutMs = 30_000): Promise<void> {
    await Promise.race([Promise.allSettled([...this.pending]), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  /** The event as it is sent. */
  build(event: string, data: Record<string, unknown>): NotificationEvent {
    return { id: randomUUID(), event, occurred_at: new Date().toISOString(), server: this.options.server(), data };
  }

  /** Builds the event and delivers it to every matching, enabled webhook. */
  async deliver(event: EventName, data: Record<string, unknown>): Promise<DeliveryResult[]> {
    const db = this.options.database();
    // Most events (every checkout) match no rule: one small query says so, before the three
    // that read every setting. Read each time, so a change made elsewhere counts at once.
    if (!(await hasEnabledRuleFor(db, event))) return [];
    const settings = await readNotificationSettings(db);
    const payload = this.build(event, data);
    const rules = settings.rules.filter((rule) => rule.enabled && eventMatches(rule.event, event));
    for (const rule of rules.filter((candidate) => candidate.email)) {
      const template = settings.email_templates.find((candidate) => eventMatches(candidate.event, event));
      this.options.log({
        level: 'warn',
        msg: 'email not sent: no SMTP server is configured',
        event,
        to: rule.email,
        subject: template ? renderTemplate(template.subject, payload) : `[license-server] ${event}`,
      });
    }
    const names = new Set(rules.flatMap((rule) => (rule.webhook ? [rule.webhook] : [])));
    const hooks = settings.webhooks.filter((hook) => hook.enabled && names.has(hook.name));
    return Promise.all(hooks.map((hook) => this.send(hook, payload)));
  }

  /**
   * One webhook, with retries and backoff; each attempt is logged (never the secret, never
   * the URL's credentials or query). Redirects are not followed: a 3xx is a failed attempt.
   * A link-local address is refused and not retried.
   */
  async send(hook: Webhook, payload: NotificationEvent): Promise<DeliveryResult> {
    const body = JSON.stringify(payload);
    const delays = this.options.retryDelaysMs ?? [1000, 5000, 25000];
    const sleep = this.options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
    const allowLinkLocal = this.options.allowLinkLocal?.() ?? false;
    const lookup = guardedLookup(this.options.lookup ?? systemResolver, allowLinkLocal);
    const about = { webhook: hook.name, event: payload.event, delivery: payload.id };
    let last: { status?: number; error?: string; code?: string; location?: string } = {};
    let attempt = 1;
    for (; attempt <= delays.length + 1; attempt += 1) {
      try {
        const url = new URL(hook.url);
        if (!allowLinkLocal) checkLiteralAddress(url, 'webhook URL points at');
        const answer = await postOnce({
          url,
          headers: {
            'content-type': 'application/json',
            'user-agent': 'license-server-webhook/1',
            'x-license-server-event': payload.event,
            'x-license-server-delivery': payload.id,
            [SIGNATURE_HEADER.toLowerCase()]: signBody(hook.secret, body),
          },
          body,
          timeoutMs: this.options.timeoutMs ?? 5000,
          lookup,
        });
        if (answer.status >= 200 && answer.status < 300) {
          this.options.log({ level: 'info', msg: 'webhook delivered', ...about, attempt, status: answer.status });
          return { webhook: hook.name, delivered: true, attempts: attempt, status: answer.status };
        }
        last = answer.status >= 300 && answer.status < 400
          ? { status: answer.status, error: 'redirect not followed', ...(answer.location === undefined ? {} : { location: redactLocation(answer.location, url) }) }
          : { status: answer.status };
      } catch (error) {
        last = describeFailure(error, hook.url);
      }
      this.options.log({ level: 'warn', msg: 'webhook attempt failed', ...about, attempt, ...last });
      if (last.code === 'WEBHOOK_ADDRESS_REFUSED') break;
      if (attempt <= delays.length) await sleep(delays[attempt - 1]!);
    }
    const attempts = Math.min(attempt, delays.length + 1);
    this.options.log({ level: 'error', msg: 'webhook gave up', ...about });
    return { webhook: hook.name, delivered: false, attempts, ...last };
  }
}

/**
 * What went wrong, in words fit for a log line: the tool's own refusal, a timeout, or the
 * socket's error code (ECONNREFUSED, ENOTFOUND, CERT_HAS_EXPIRED). Any other message is
 * cleared of the URL's credentials, in case it quotes the URL.
 */
function describeFailure(error: unknown, url: string): { error: string; code?: string } {
  if (isLicenseServerError(error)) return { error: error.message, code: error.code };
  const failure = error as { name?: string; code?: unknown; message?: unknown; cause?: { code?: unknown } };
  if (failure.name === 'TimeoutError') return { error: 'timed out' };
  const code = typeof failure.code === 'string' ? failure.code : typeof failure.cause?.code === 'string' ? failure.cause.code : undefined;
  if (code) return { error: code };
  return { error: withoutUrlSecrets(String(failure.message ?? error), url) };
}

function withoutUrlSecrets(text: string, url: string): string {
  let cleaned = text.split(url).join(redactUrl(url));
  try {
    const parsed = new URL(url);
    const secrets = [parsed.password, parsed.password ? '' : parsed.username, parsed.search.slice(1), parsed.hash.slice(1)];
    for (const secret of secrets.filter((part) => part.length > 0)) {
      for (const form of new Set([secret, safeDecode(secret)])) cleaned = cleaned.split(form).join('***');
    }
  } catch {
    // An unparseable URL fails before any request; its text is not in the message.
  }
  return cleaned;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** A Location header, resolved against the webhook URL (it may be relative), credentials hidden. */
function redactLocation(location: string, base: URL): string {
  try {
    return redactUrl(new URL(location, base).toString());
  } catch {
    return '[unparseable Location redacted]';
  }
}
