import { hostname } from 'node:os';
import type { Database, Queryable, Row } from '../storage/types.js';
import { asBool, asIso } from '../storage/values.js';
import { attemptWebhook, type WebhookAttempt } from './notifier.js';
import type { Resolver } from './address.js';
import { renderEmail } from './templates.js';
import type { EmailTemplate, Webhook } from './settings.js';

/** The retry schedule (notifications.retry_first_delay, retry_max_delay, give_up_after). */
export interface RetrySchedule {
  readonly firstDelaySeconds: number;
  readonly maxDelaySeconds: number;
  readonly giveUpHours: number;
}

export const DEFAULT_RETRY: RetrySchedule = { firstDelaySeconds: 30, maxDelaySeconds: 3600, giveUpHours: 24 };

/**
 * The wait before attempt `attempts + 1`, after `attempts` failed ones: the first delay,
 * doubling, capped (30 s, 1 min, 2 min, ... 1 h, 1 h, ... by default).
 */
export function retryDelayMs(schedule: RetrySchedule, attempts: number): number {
  const doublings = Math.min(Math.max(attempts - 1, 0), 40);
  return Math.min(schedule.firstDelaySeconds * 2 ** doublings, schedule.maxDelaySeconds) * 1000;
}

/** A message for the SMTP relay; the sender throws an error with `permanent: true` for a refusal not worth retrying. */
export interface OutgoingEmail {
  readonly deliveryId: string;
  readonly to: string;
  readonly subject: string;
  readonly text: string;
}
export type EmailSender = (message: OutgoingEmail) => Promise<void>;

export interface DelivererOptions {
  readonly database: () => Database;
  /** The server's `issuer`, the `server` of each event. */
  readonly server: () => string;
  readonly retry: () => RetrySchedule;
  /** Undefined when no SMTP server is configured: email deliveries wait (and retry) until one is. */
  readonly email: () => EmailSender | undefined;
  readonly allowLinkLocal: () => boolean;
  readonly log: (entry: Record<string, unknown>) => void;
  readonly clock?: () => Date;
  /** Who claims deliveries: host and pid by default. */
  readonly owner?: string;
  readonly webhookTimeoutMs?: number;
  readonly lookup?: Resolver;
}

/** What one delivery attempt came to, for the command line's warnings and for tests. */
export interface DeliveryOutcome {
  readonly id: string;
  readonly event: string;
  readonly channel: 'webhook' | 'email';
  readonly target: string;
  readonly status: 'delivered' | 'pending' | 'failed';
  readonly attempts: number;
  /** What went wrong, as `notifications deliveries` shows it: `HTTP 500`, `ECONNREFUSED`, `SMTP 550 ...`. */
  readonly error?: string;
  readonly next_attempt_at?: string;
  /** The webhook's HTTP status. */
  readonly http_status?: number;
  /** WEBHOOK_ADDRESS_REFUSED when the tool, not the receiver, refused. */
  readonly code?: string;
}

/** One attempt's result before it is recorded. */
interface Attempted {
  readonly delivered: boolean;
  /** Not worth retrying: a refused address, a webhook gone, an SMTP 5xx. */
  readonly permanent: boolean;
  readonly status?: number;
  /** The whole story, for the record and the command line. */
  readonly error?: string;
  /** Log fields: the receiver's error alone, the tool's code, a redirect's redacted Location. */
  readonly detail?: { readonly error?: string; readonly code?: string; readonly location?: string };
}

interface Claimed {
  readonly id: string;
  readonly event_id: string;
  readonly event: string;
  readonly occurred_at: string;
  readonly data: string;
  readonly channel: 'webhook' | 'email';
  readonly target: string;
  readonly attempts: number;
  readonly retry_from: string;
}

/** What an attempt comes to: its status, its next attempt when pending, its error as stored. */
interface Verdict {
  readonly status: DeliveryOutcome['status'];
  readonly next: string | undefined;
  readonly error: string | null;
}

/** What the deliveries of one claimed batch go to. */
interface Targets {
  readonly webhooks: ReadonlyMap<string, Webhook>;
  readonly templates: readonly EmailTemplate[];
}

/** Attempts in flight at once, per process. */
const CONCURRENCY = 16;

/**
 * Sends what the outbox holds (outbox.ts): claims due deliveries, makes one attempt at each,
 * and records the outcome, with the next attempt on the retry schedule or the final status.
 * A claim is a lease (claimed_until): PostgreSQL daemons claim with FOR UPDATE SKIP LOCKED,
 * so each delivery goes to exactly one of them; SQLite serialises the claim by its write
 * lock. A process that dies holding a claim loses it when the lease runs out, and a delivery
 * it was sending is sent again then, with the same delivery id for the receiver to drop.
 */
export class Deliverer {
  readonly owner: string;
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  private again = false;
  private stopped = false;
  private lastPrune = 0;
  /** Attempts ended and waiting to be recorded together (record()). */
  private recording: Array<{ readonly delivery: Claimed; readonly outcome: Attempted; readonly at: Date; readonly verdict: Verdict; done(error?: unknown): void }> = [];

  constructor(private readonly options: DelivererOptions) {
    this.owner = options.owner ?? `${hostname()}:${process.pid}`;
  }

  private now(): Date {
    return this.options.clock ? this.options.clock() : new Date();
  }

  /** How long a claim holds: longer than any attempt takes. */
  private leaseMs(): number {
    return 120_000;
  }

  /**
   * One round: claims due deliveries (only `ids` when given) and attempts each once, up to
   * CONCURRENCY at a time, claiming more as attempts end and as new ones come due, until none
   * is left or the deadline passes. A receiver that hangs holds one slot until its timeout,
   * not the others. Returns the outcome of every attempt made.
   */
  async deliverDue(options: { readonly ids?: readonly string[]; readonly deadline?: number } = {}): Promise<DeliveryOutcome[]> {
    const outcomes: DeliveryOutcome[] = [];
    const done = new Set<string>();
    const inFlight = new Map<string, Promise<void>>();
    while (options.deadline === undefined || Date.now() < options.deadline) {
      const free = CONCURRENCY - inFlight.size;
      let claimed: Claimed[] = [];
      if (free > 0) {
        const ids = options.ids?.filter((id) => !done.has(id) && !inFlight.has(id));
        if (ids === undefined || ids.length > 0) claimed = await this.claim(ids, free);
      }
      // A failed read fails each attempt of the batch, recorded and retried like any other.
      const targets = claimed.length > 0 ? await this.readTargets(claimed).catch((error: unknown) => (error instanceof Error ? error : new Error(String(error)))) : undefined;
      for (const delivery of claimed) {
        inFlight.set(delivery.id, this.attempt(delivery, targets!, options.deadline).then((outcome) => {
          done.add(outcome.id);
          outcomes.push(outcome);
        }).finally(() => inFlight.delete(delivery.id)));
      }
      if (inFlight.size === 0) break;
      // An attempt ending frees a slot; with slots free, look again shortly for new ones.
      const waits: Array<Promise<unknown>> = [...inFlight.values()];
      if (CONCURRENCY - inFlight.size > 0) waits.push(new Promise((resolve) => setTimeout(resolve, 250).unref()));
      await Promise.race(waits);
    }
    await Promise.all(inFlight.values());
    return outcomes;
  }

  private async claim(ids: readonly string[] | undefined, limit: number): Promise<Claimed[]> {
    const db = this.options.database();
    const at = this.now();
    const filter = ids === undefined ? '' : ` AND id IN (${ids.map(() => '?').join(', ')})`;
    const lock = db.engine === 'postgres' ? ' FOR UPDATE SKIP LOCKED' : '';
    // The daemon asks every 2 s, nearly always in vain: on SQLite a read answers that, where a
    // claim would take the write lock each time. (On PostgreSQL a claim that finds nothing
    // writes nothing: the read would only add a round trip.)
    if (ids === undefined && db.engine === 'sqlite') {
      const due = await db.query(`SELECT id FROM notification_deliveries WHERE status = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?) LIMIT 1`, [at.toISOString(), at.toISOString()]);
      if (due.length === 0) return [];
    }
    const rows = await oneStatement(db, (tx) =>
      tx.query(
        `UPDATE notification_deliveries SET claimed_by = ?, claimed_until = ?
         WHERE id IN (SELECT id FROM notification_deliveries
                      WHERE status = 'pending' AND next_attempt_at <= ? AND (claimed_until IS NULL OR claimed_until < ?)${filter}
                      ORDER BY next_attempt_at LIMIT ${Math.max(1, Math.floor(limit))}${lock})
         RETURNING id, event_id, event, occurred_at, data, channel, target, attempts, retry_from`,
        [this.owner, new Date(at.getTime() + this.leaseMs()).toISOString(), at.toISOString(), at.toISOString(), ...(ids ?? [])],
      ),
    );
    return rows.map(toClaimed);
  }

  /**
   * The webhooks and email templates a claimed batch needs, read once for the batch rather
   * than once per delivery: as configured now, at the claim.
   */
  private async readTargets(claimed: readonly Claimed[]): Promise<Targets> {
    const db = this.options.database();
    const names = [...new Set(claimed.filter((delivery) => delivery.channel === 'webhook').map((delivery) => delivery.target))];
    const hooks = names.length === 0 ? [] : await db.query(`SELECT name, url, secret, enabled FROM notification_webhooks WHERE name IN (${names.map(() => '?').join(', ')})`, names);
    const templates = claimed.some((delivery) => delivery.channel === 'email') ? await db.query('SELECT event, subject, body FROM notification_email_templates ORDER BY event') : [];
    return {
      webhooks: new Map(hooks.map((row) => [String(row.name), { name: String(row.name), url: String(row.url), secret: String(row.secret), enabled: asBool(row.enabled) }])),
      templates: templates.map((row) => ({ event: String(row.event), subject: String(row.subject), body: String(row.body) })),
    };
  }

  private async attempt(delivery: Claimed, targets: Targets | Error, deadline: number | undefined): Promise<DeliveryOutcome> {
    const timeoutMs = Math.max(500, Math.min(this.options.webhookTimeoutMs ?? 5000, deadline === undefined ? Infinity : deadline - Date.now()));
    let outcome: Attempted;
    try {
      if (targets instanceof Error) throw targets;
      outcome = delivery.channel === 'webhook' ? await this.sendWebhook(delivery, targets.webhooks.get(delivery.target), timeoutMs) : await this.sendEmail(delivery, targets.templates);
    } catch (error) {
      outcome = { delivered: false, permanent: false, error: error instanceof Error ? error.message : String(error) };
    }
    return this.record(delivery, outcome);
  }

  private payload(delivery: Claimed): string {
    return JSON.stringify({ id: delivery.event_id, event: delivery.event, occurred_at: delivery.occurred_at, server: this.options.server(), data: JSON.parse(delivery.data) });
  }

  private async sendWebhook(delivery: Claimed, hook: Webhook | undefined, timeoutMs: number): Promise<Attempted> {
    if (!hook) return { delivered: false, permanent: true, error: `webhook ${JSON.stringify(delivery.target)} is no longer defined` };
    if (!hook.enabled) return { delivered: false, permanent: true, error: `webhook ${JSON.stringify(delivery.target)} is disabled` };
    const result: WebhookAttempt = await attemptWebhook(hook, { id: delivery.id, event: delivery.event, body: this.payload(delivery) }, {
      timeoutMs,
      allowLinkLocal: this.options.allowLinkLocal(),
      lookup: this.options.lookup,
    });
    if (result.delivered) return { delivered: true, permanent: false, status: result.status };
    const error = result.status === undefined ? result.error : `HTTP ${result.status}${result.error ? ` (${[result.error, result.location].filter(Boolean).join(': ')})` : ''}`;
    const { delivered: _, status, ...detail } = result;
    return { delivered: false, permanent: result.code === 'WEBHOOK_ADDRESS_REFUSED', ...(status === undefined ? {} : { status }), ...(error ? { error } : {}), detail };
  }

  private async sendEmail(delivery: Claimed, templates: readonly EmailTemplate[]): Promise<Attempted> {
    const send = this.options.email();
    if (!send) return { delivered: false, permanent: false, error: 'no SMTP server is configured (notifications.smtp.host)' };
    const event = { id: delivery.event_id, event: delivery.event, occurred_at: delivery.occurred_at, server: this.options.server(), data: JSON.parse(delivery.data) as Record<string, unknown> };
    const { subject, text } = renderEmail(templates, event);
    try {
      await send({ deliveryId: delivery.id, to: delivery.target, subject, text });
      return { delivered: true, permanent: false };
    } catch (error) {
      const failure = error as { message?: unknown; permanent?: unknown };
      return { delivered: false, permanent: failure.permanent === true, error: String(failure.message ?? error) };
    }
  }

  /**
   * Records an attempt, fenced by the claim: a claim lost to another process records nothing.
   * The attempts that end in one turn of the event loop are recorded together, in one
   * transaction: with many deliveries in flight, one commit each would cost the database
   * more than the deliveries themselves.
   */
  private async record(delivery: Claimed, outcome: Attempted): Promise<DeliveryOutcome> {
    const at = this.now();
    const verdict = this.verdict(delivery, outcome, at);
    await new Promise<void>((resolve, reject) => {
      if (this.recording.length === 0) setImmediate(() => void this.flushRecords());
      this.recording.push({ delivery, outcome, at, verdict, done: (error) => (error === undefined ? resolve() : reject(error)) });
    });
    return this.recorded(delivery, outcome, verdict);
  }

  private async flushRecords(): Promise<void> {
    const batch = this.recording.splice(0);
    const db = this.options.database();
    try {
      await (batch.length === 1 ? oneStatement : (on: Database, work: (tx: Queryable) => Promise<void>) => on.transaction(work))(db, async (tx) => {
        for (const { delivery, outcome, at, verdict: { status, next, error } } of batch) {
          await tx.execute(
            `UPDATE notification_deliveries SET status = ?, attempts = ?, last_attempt_at = ?, last_status = ?, last_error = ?, delivered_at = ?,
               next_attempt_at = ?, claimed_by = NULL, claimed_until = NULL
             WHERE id = ? AND claimed_by = ?`,
            [status, delivery.attempts + 1, at.toISOString(), outcome.status ?? null, outcome.delivered ? null : error, outcome.delivered ? at.toISOString() : null, next ?? at.toISOString(), delivery.id, this.owner],
          );
        }
      });
      for (const item of batch) item.done();
    } catch (error) {
      for (const item of batch) item.done(error);
    }
  }

  /** An attempt's consequence: delivered, pending with its next attempt, or failed for good. */
  private verdict(delivery: Claimed, outcome: Attempted, at: Date): Verdict {
    const attempts = delivery.attempts + 1;
    const schedule = this.options.retry();
    const giveUpAt = new Date(delivery.retry_from).getTime() + schedule.giveUpHours * 3_600_000;
    let status: DeliveryOutcome['status'];
    let next: string | undefined;
    if (outcome.delivered) status = 'delivered';
    else if (outcome.permanent || at.getTime() >= giveUpAt) status = 'failed';
    else {
      status = 'pending';
      // The last attempt falls on the give-up time itself rather than past it.
      next = new Date(Math.min(at.getTime() + retryDelayMs(schedule, attempts), giveUpAt)).toISOString();
    }
    return { status, next, error: outcome.error === undefined ? null : outcome.error.slice(0, 500) };
  }

  /** Logs a recorded attempt and says what it came to. */
  private recorded(delivery: Claimed, outcome: Attempted, { status, next, error }: Verdict): DeliveryOutcome {
    const attempts = delivery.attempts + 1;
    const about = { delivery: delivery.id, event: delivery.event, channel: delivery.channel, ...(delivery.channel === 'webhook' ? { webhook: delivery.target } : {}), attempt: attempts };
    if (status === 'delivered') this.options.log({ level: 'info', msg: 'notification delivered', ...about, ...(outcome.status === undefined ? {} : { status: outcome.status }) });
    else {
      const detail = outcome.detail ?? (error ? { error } : {});
      this.options.log({ level: 'warn', msg: 'notification attempt failed', ...about, ...(outcome.status === undefined ? {} : { status: outcome.status }), ...detail, ...(next ? { next_attempt_at: next } : {}) });
      if (status === 'failed') this.options.log({ level: 'error', msg: 'notification gave up', ...about });
    }
    return {
      id: delivery.id,
      event: delivery.event,
      channel: delivery.channel,
      target: delivery.target,
      status,
      attempts,
      ...(error && !outcome.delivered ? { error } : {}),
      ...(next ? { next_attempt_at: next } : {}),
      ...(outcome.status === undefined ? {} : { http_status: outcome.status }),
      ...(outcome.detail?.code ? { code: outcome.detail.code } : {}),
    };
  }

  /**
   * Where deliveries stand now, for those of `ids` this process did not attempt itself (a
   * daemon claimed them first): `inFlight` while another process holds a live claim on one;
   * otherwise its status, attempts, last error and next attempt as recorded. An id no longer
   * in the outbox is left out.
   */
  async standing(ids: readonly string[]): Promise<Array<DeliveryOutcome & { readonly inFlight: boolean }>> {
    if (ids.length === 0) return [];
    const at = this.now().getTime();
    const rows = await this.options.database().query(
      `SELECT id, event, channel, target, status, attempts, last_error, last_status, next_attempt_at, claimed_by, claimed_until FROM notification_deliveries WHERE id IN (${ids.map(() => '?').join(', ')})`,
      [...ids],
    );
    return rows.map((row) => {
      const status = String(row.status) as DeliveryOutcome['status'];
      const claimed = row.claimed_by !== null && row.claimed_by !== undefined && row.claimed_until !== null && new Date(asIso(row.claimed_until)).getTime() > at;
      return {
        id: String(row.id),
        event: String(row.event),
        channel: row.channel === 'email' ? 'email' : 'webhook',
        target: String(row.target),
        status,
        attempts: Number(row.attempts),
        inFlight: status === 'pending' && claimed,
        ...(row.last_error === null || row.last_error === undefined ? {} : { error: String(row.last_error) }),
        ...(status === 'pending' ? { next_attempt_at: asIso(row.next_attempt_at) } : {}),
        ...(row.last_status === null || row.last_status === undefined ? {} : { http_status: Number(row.last_status) }),
      };
    });
  }

  /**
   * Releases claims that processes of this host which no longer run still hold (a daemon
   * that was SIGKILLed mid-attempt), so that its restart does not wait for their leases.
   */
  async releaseDeadClaims(): Promise<number> {
    const db = this.options.database();
    const host = `${hostname()}:`;
    const rows = await db.query<{ claimed_by: string }>(`SELECT DISTINCT claimed_by FROM notification_deliveries WHERE status = 'pending' AND claimed_by IS NOT NULL`);
    let released = 0;
    for (const { claimed_by: owner } of rows) {
      if (!owner.startsWith(host) || owner === this.owner) continue;
      const pid = Number(owner.slice(host.length));
      if (!Number.isInteger(pid) || isAlive(pid)) continue;
      released += await db.execute(`UPDATE notification_deliveries SET claimed_by = NULL, claimed_until = NULL WHERE claimed_by = ? AND status = 'pending'`, [owner]);
    }
    return released;
  }

  /** Deletes delivered and given-up deliveries older than `days`, a batch at a time. */
  async prune(days: number): Promise<number> {
    const db = this.options.database();
    const before = new Date(this.now().getTime() - days * 86_400_000).toISOString();
    let removed = 0;
    for (;;) {
      const count = await db.execute(
        `DELETE FROM notification_deliveries WHERE id IN (
           SELECT id FROM notification_deliveries WHERE status = 'delivered' AND created_at < ? ORDER BY created_at LIMIT 1000)
         OR id IN (SELECT id FROM notification_deliveries WHERE status = 'failed' AND created_at < ? ORDER BY created_at LIMIT 1000)`,
        [before, before],
      );
      removed += count;
      if (count === 0 || this.stopped) return removed;
    }
  }

  /**
   * The daemon's loop: a round every `pollMs`, and at once when woken (a delivery raised in
   * this process), pruning once an hour. Rounds never overlap.
   */
  start(options: { readonly pollMs?: number; readonly pruneAfterDays?: () => number } = {}): void {
    const poll = options.pollMs ?? 2000;
    void this.releaseDeadClaims().catch((error: unknown) => this.options.log({ level: 'warn', msg: 'could not release stale notification claims', error: String(error) }));
    const tick = () => {
      this.timer = undefined;
      if (this.stopped) return;
      this.running = this.round(options.pruneAfterDays).finally(() => {
        this.running = undefined;
        if (this.stopped) return;
        const delay = this.again ? 0 : poll;
        this.again = false;
        this.timer = setTimeout(tick, delay);
        this.timer.unref();
      });
    };
    this.timer = setTimeout(tick, 0);
    this.timer.unref();
    let woken = false;
    this.wakeTick = () => {
      if (this.stopped) return;
      if (this.running) this.again = true;
      else if (this.timer && !woken) {
        // A moment's wait: the transaction that raised the delivery commits after it was
        // announced. Later wakes join this one rather than push it back, so that a steady
        // stream of events is sent as it comes, in batches, not after the stream stops.
        clearTimeout(this.timer);
        woken = true;
        this.timer = setTimeout(() => {
          woken = false;
          tick();
        }, 20);
        this.timer.unref();
      }
    };
  }

  private wakeTick: (() => void) | undefined;

  /** Something was raised: deliver it soon rather than at the next poll. */
  wake(): void {
    this.wakeTick?.();
  }

  private async round(pruneAfterDays: (() => number) | undefined): Promise<void> {
    try {
      await this.deliverDue();
      if (pruneAfterDays && Date.now() - this.lastPrune > 3_600_000) {
        this.lastPrune = Date.now();
        const removed = await this.prune(pruneAfterDays());
        if (removed > 0) this.options.log({ level: 'info', msg: 'pruned old notification deliveries', removed });
      }
    } catch (error) {
      this.options.log({ level: 'warn', msg: 'notification delivery round failed', error: error instanceof Error ? error.message : String(error) });
    }
  }

  /** Stops the loop; waits (at most `timeoutMs`) for the round in progress. */
  async stop(timeoutMs = 3000): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    if (this.running) await Promise.race([this.running, new Promise((resolve) => setTimeout(resolve, timeoutMs).unref())]);
  }
}

/**
 * Runs one writing statement. On PostgreSQL it is a transaction by itself: one round trip,
 * where BEGIN and COMMIT would make three. On SQLite transaction() takes the write lock at
 * once and shares its commit with the other writers' (group commit).
 */
function oneStatement<T>(db: Database, work: (q: Queryable) => Promise<T>): Promise<T> {
  return db.engine === 'postgres' ? work(db) : db.transaction(work);
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function toClaimed(row: Row): Claimed {
  return {
    id: String(row.id),
    event_id: String(row.event_id),
    event: String(row.event),
    occurred_at: asIso(row.occurred_at),
    data: String(row.data),
    channel: row.channel === 'email' ? 'email' : 'webhook',
    target: String(row.target),
    attempts: Number(row.attempts),
    retry_from: asIso(row.retry_from),
  };
}
