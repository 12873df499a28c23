import { randomUUID } from 'node:crypto';
import { EmailSendError, sendEmail, type SmtpSettings } from './email.js';

/** One row of `notifications test` for an email target. */
export interface EmailTestResult {
  readonly target: string;
  readonly channel: 'email';
  readonly email: string;
  readonly delivered: boolean;
  readonly delivery_id: string;
  /** The SMTP server's last answer when it took the message. */
  readonly response?: string;
  readonly error?: string;
  /** Whether trying again would not help (a 5xx answer); only when not delivered. */
  readonly permanent?: boolean;
}

/**
 * Sends one notification.test email straight through SMTP, not through the outbox: the
 * operator wants to know now whether the relay takes mail, not that it was queued. A failed
 * send is a result, not an exception; anything else (a bug) still throws.
 */
export async function sendTestEmail(smtp: SmtpSettings, to: string, server: string): Promise<EmailTestResult> {
  const deliveryId = randomUUID();
  const base = { target: `email:${to}`, channel: 'email' as const, email: to, delivery_id: deliveryId };
  try {
    const { response } = await sendEmail(smtp, {
      deliveryId,
      to,
      subject: `Test notification from ${server}`,
      text: [
        `This is a test email from the license server ${server} (event notification.test),`,
        'sent by `license-server notifications test --email`.',
        '',
        'If you can read it, email notifications reach this address.',
        `Delivery id: ${deliveryId}`,
        '',
      ].join('\n'),
    });
    return { ...base, delivered: true, response };
  } catch (error) {
    if (!(error instanceof EmailSendError)) throw error;
    return { ...base, delivered: false, error: error.message, permanent: error.permanent };
  }
}
