import { createHmac, randomUUID } from 'node:crypto';
import { redactUrl } from '../config/redact.js';
import { isLicenseServerError } from '../errors.js';
import { checkLiteralAddress, guardedLookup, systemResolver, type Resolver } from './address.js';
import { postOnce } from './post.js';
import type { Webhook } from './settings.js';

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
  readonly server: () => string;
  readonly log: (entry: Record<string, unknown>) => void;
  /** Waits between attempts (none by default). */
  readonly retryDelaysMs?: readonly number[];
  readonly timeoutMs?: number;
  /** The wait between attempts; the default's timer is referenced, so that a command line awaiting it is not abandoned mid-wait (exit 13). */
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

/** What one POST to a webhook came to. */
export interface WebhookAttempt {
  readonly delivered: boolean;
  readonly status?: number;
  readonly error?: string;
  /** An error code of the tool (WEBHOOK_ADDRESS_REFUSED) when it, not the receiver, refused: not worth retrying. */
  readonly code?: string;
  /** Where a redirect pointed, credentials redacted; it was not followed. */
  readonly location?: string;
}

export interface WebhookAttemptOptions {
  readonly timeoutMs?: number;
  readonly allowLinkLocal?: boolean;
  readonly lookup?: Resolver;
}

/**
 * One POST of a delivery's body to a webhook, signed with its secret. Redirects are not
 * followed: a 3xx is a failed attempt. A link-local address is refused (`code`). Never
 * throws; the outcome names no secret and no URL credentials.
 */
export async function attemptWebhook(
  hook: Pick<Webhook, 'url' | 'secret'>,
  delivery: { readonly id: string; readonly event: string; readonly body: string },
  options: WebhookAttemptOptions = {},
): Promise<WebhookAttempt> {
  const allowLinkLocal = options.allowLinkLocal ?? false;
  try {
    const url = new URL(hook.url);
    if (!allowLinkLocal) checkLiteralAddress(url, 'webhook URL points at');
    const answer = await postOnce({
      url,
      headers: {
        'content-type': 'application/json',
        'user-agent': 'license-server-webhook/1',
        'x-license-server-event': delivery.event,
        'x-license-server-delivery': delivery.id,
        [SIGNATURE_HEADER.toLowerCase()]: signBody(hook.secret, delivery.body),
      },
      body: delivery.body,
      timeoutMs: options.timeoutMs ?? 5000,
      lookup: guardedLookup(options.lookup ?? systemResolver, allowLinkLocal),
    });
    if (answer.status >= 200 && answer.status < 300) return { delivered: true, status: answer.status };
    return answer.status >= 300 && answer.status < 400
      ? { delivered: false, status: answer.status, error: 'redirect not followed', ...(answer.location === undefined ? {} : { location: redactLocation(answer.location, url) }) }
      : { delivered: false, status: answer.status };
  } catch (error) {
    return { delivered: false, ...describeFailure(error, hook.url) };
  }
}

/**
 * `notifications test`'s direct sends: an event built here and POSTed to one webhook, with
 * the given retries (none by default), whatever the rules say. Events raised by the
 * server's own work go through the outbox instead (outbox.ts, deliverer.ts).
 */
export class Notifier {
  constructor(private readonly options: NotifierOptions) {}

  /** The event as it is sent. */
  build(event: string, data: Record<string, unknown>): NotificationEvent {
    return { id: randomUUID(), event, occurred_at: new Date().toISOString(), server: this.options.server(), data };
  }

  async send(hook: Webhook, payload: NotificationEvent): Promise<DeliveryResult> {
    const body = JSON.stringify(payload);
    const delays = this.options.retryDelaysMs ?? [];
    const sleep = this.options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
    const about = { webhook: hook.name, event: payload.event, delivery: payload.id };
    let last: WebhookAttempt = { delivered: false };
    let attempt = 1;
    for (; attempt <= delays.length + 1; attempt += 1) {
      last = await attemptWebhook(hook, { id: payload.id, event: payload.event, body }, {
        timeoutMs: this.options.timeoutMs,
        allowLinkLocal: this.options.allowLinkLocal?.() ?? false,
        lookup: this.options.lookup,
      });
      if (last.delivered) {
        this.options.log({ level: 'info', msg: 'webhook delivered', ...about, attempt, status: last.status });
        return { webhook: hook.name, delivered: true, attempts: attempt, status: last.status };
      }
      const { delivered: _, ...failure } = last;
      this.options.log({ level: 'warn', msg: 'webhook attempt failed', ...about, attempt, ...failure });
      if (last.code === 'WEBHOOK_ADDRESS_REFUSED') break;
      if (attempt <= delays.length) await sleep(delays[attempt - 1]!);
    }
    const { delivered: _, ...failure } = last;
    return { webhook: hook.name, delivered: false, attempts: Math.min(attempt, delays.length + 1), ...failure };
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
