import { createHmac, randomUUID } from 'node:crypto';
import type { Queryable } from '../storage/types.js';
import { renderTemplate } from './render.js';
import { eventMatches, readNotificationSettings, type EventName, type Webhook } from './settings.js';

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
}

export interface NotifierOptions {
  readonly database: () => Queryable;
  readonly server: () => string;
  readonly log: (entry: Record<string, unknown>) => void;
  /** Waits between attempts: 1 s, 5 s, 25 s by default (tests pass shorter ones). */
  readonly retryDelaysMs?: readonly number[];
  readonly timeoutMs?: number;
  readonly sleep?: (ms: number) => Promise<void>;
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

  /** Waits for deliveries in flight, for at most `timeoutMs` (a CLI before it exits, a test). */
  async settle(timeoutMs = 30_000): Promise<void> {
    await Promise.race([Promise.allSettled([...this.pending]), new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }

  /** The event as it is sent. */
  build(event: string, data: Record<string, unknown>): NotificationEvent {
    return { id: randomUUID(), event, occurred_at: new Date().toISOString(), server: this.options.server(), data };
  }

  /** Builds the event and delivers it to every matching, enabled webhook. */
  async deliver(event: EventName, data: Record<string, unknown>): Promise<DeliveryResult[]> {
    const settings = await readNotificationSettings(this.options.database());
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

  /** One webhook, with retries and backoff; each attempt is logged (never the secret). */
  async send(hook: Webhook, payload: NotificationEvent): Promise<DeliveryResult> {
    const body = JSON.stringify(payload);
    const delays = this.options.retryDelaysMs ?? [1000, 5000, 25000];
    const sleep = this.options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()));
    let last: { status?: number; error?: string } = {};
    for (let attempt = 1; attempt <= delays.length + 1; attempt += 1) {
      try {
        const response = await fetch(hook.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'license-server-webhook/1',
            'x-license-server-event': payload.event,
            'x-license-server-delivery': payload.id,
            [SIGNATURE_HEADER.toLowerCase()]: signBody(hook.secret, body),
          },
          body,
          signal: AbortSignal.timeout(this.options.timeoutMs ?? 5000),
        });
        await response.arrayBuffer().catch(() => undefined);
        last = { status: response.status };
        if (response.ok) {
          this.options.log({ level: 'info', msg: 'webhook delivered', webhook: hook.name, event: payload.event, delivery: payload.id, attempt, status: response.status });
          return { webhook: hook.name, delivered: true, attempts: attempt, status: response.status };
        }
      } catch (error) {
        last = { error: (error as Error).name === 'TimeoutError' ? 'timed out' : ((error as { cause?: { code?: string } }).cause?.code ?? (error as Error).message) };
      }
      this.options.log({ level: 'warn', msg: 'webhook attempt failed', webhook: hook.name, event: payload.event, delivery: payload.id, attempt, ...last });
      if (attempt <= delays.length) await sleep(delays[attempt - 1]!);
    }
    this.options.log({ level: 'error', msg: 'webhook gave up', webhook: hook.name, event: payload.event, delivery: payload.id });
    return { webhook: hook.name, delivered: false, attempts: delays.length + 1, ...last };
  }
}
