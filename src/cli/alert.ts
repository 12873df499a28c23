import type { ResolvedConfig } from '../lib/config/resolve.js';
import type { DeliveryResult } from '../lib/notifications/notifier.js';
import type { EventName } from '../lib/notifications/settings.js';
import type { Database } from '../lib/storage/types.js';

/**
 * How long a command line waits for its alerts: one retry after 1 s, each attempt at most
 * 5 s, so 11 s at worst whatever the webhooks do. The daemon's own deliveries retry for
 * longer in the background; a command that exits cannot, and nothing sends its alerts later.
 */
const CLI_RETRY_DELAYS_MS = [1000];

/**
 * Sends `event` to the webhooks its rules select and waits for the answers, then returns one
 * warning line per failed delivery. Never throws: an alert must not change the result or
 * the exit code of the command that raised it.
 */
export async function alertFromCommandLine(db: Database, config: ResolvedConfig, event: EventName, data: Record<string, unknown>): Promise<string[]> {
  try {
    const { Notifier } = await import('../lib/notifications/notifier.js');
    const notifier = new Notifier({
      database: () => db,
      server: () => config.settings.issuer,
      log: () => undefined,
      retryDelaysMs: CLI_RETRY_DELAYS_MS,
      // Referenced, unlike the daemon's default: with nothing else pending, Node would
      // otherwise abandon the command's await during the retry's wait and exit 13.
      sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
      allowLinkLocal: () => config.settings.notifications.allowLinkLocal,
    });
    const results = await notifier.deliver(event, data);
    return results.filter((result) => !result.delivered).map((result) => `${event} was not delivered to webhook ${JSON.stringify(result.webhook)}: ${failure(result)} (${result.attempts} attempt${result.attempts === 1 ? '' : 's'}; it is not sent again)`);
  } catch (error) {
    return [`${event} was not sent: ${error instanceof Error ? error.message : String(error)}`];
  }
}

function failure(result: DeliveryResult): string {
  if (result.status === undefined) return result.error ?? 'failed';
  return `HTTP ${result.status}${result.error ? ` (${[result.error, result.location].filter(Boolean).join(': ')})` : ''}`;
}
