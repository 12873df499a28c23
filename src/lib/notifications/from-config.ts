import type { ResolvedConfig } from '../config/resolve.js';
import type { Database } from '../storage/types.js';
import { Deliverer, type EmailSender } from './deliverer.js';

/**
 * The deliverer for a configuration: its issuer, retry schedule, link-local rule and SMTP
 * relay, read through `config()` at each use, so that the daemon's reloaded configuration
 * counts at the next attempt.
 */
export function delivererFor(database: () => Database, config: () => ResolvedConfig, log: (entry: Record<string, unknown>) => void): Deliverer {
  return new Deliverer({
    database,
    server: () => config().settings.issuer,
    retry: () => config().settings.notifications.retry,
    email: () => emailSender(config()),
    allowLinkLocal: () => config().settings.notifications.allowLinkLocal,
    log,
  });
}

function emailSender(config: ResolvedConfig): EmailSender | undefined {
  const smtp = config.settings.notifications.smtp;
  if (!smtp) return undefined;
  // nodemailer loads only when an email is sent.
  return async (message) => {
    const { sendEmail } = await import('./email.js');
    await sendEmail(smtp, message);
  };
}
