import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import type { SmtpSettings } from '../../src/lib/notifications/email.js';

/**
 * What a scripted relay answers at one step of the conversation: reply lines (CRLF added), or
 * `reset` (a TCP RST), `close` (a FIN), `silent` (nothing, ever).
 */
export type Reply = string | 'reset' | 'close' | 'silent';

/**
 * One SMTP conversation, step by step. Unset steps answer as a plain relay that takes the
 * mail (no STARTTLS, no AUTH), so that a script names only its fault.
 */
export interface SmtpScript {
  readonly greeting?: Reply;
  readonly ehlo?: Reply;
  /** Answered to STARTTLS; after a 2xx the relay sends bytes that are no TLS handshake. */
  readonly starttls?: Reply;
  readonly auth?: Reply;
  readonly mail?: Reply;
  readonly rcpt?: Reply;
  readonly data?: Reply;
  /** The answer after the message's final dot. */
  readonly message?: Reply;
}

export interface ScriptedSmtp {
  readonly port: number;
  /** Connections accepted so far, the forwarded ones included. */
  connections(): number;
  /** Messages a script took (its final 250), not counting forwarded ones. */
  accepted(): number;
  /** Settings for plain SMTP (tls: none) without AUTH to this relay; `overrides` replace fields. */
  settings(overrides?: Partial<SmtpSettings>): SmtpSettings;
  close(): Promise<void>;
}

const DEFAULTS: Required<SmtpScript> = {
  greeting: '220 relay.test ESMTP',
  ehlo: '250-relay.test\r\n250 8BITMIME',
  starttls: '220 2.0.0 Ready to start TLS',
  auth: '235 2.7.0 Authentication successful',
  mail: '250 2.1.0 Ok',
  rcpt: '250 2.1.5 Ok',
  data: '354 End data with <CR><LF>.<CR><LF>',
  message: '250 2.0.0 Ok: queued',
};

/**
 * A real TCP peer on a loopback port that speaks just enough SMTP to misbehave on cue: each
 * connection (numbered from 1) gets the script `scriptFor(n)` returns, or is forwarded byte
 * for byte to `forwardTo` (host:port, such as the suite's real SMTP server) when it returns
 * `forward`. nodemailer is then facing the very bytes a broken relay or a middlebox would
 * send: a garbage greeting, a reset, a reply without a code.
 */
export async function startScriptedSmtp(scriptFor: (connection: number) => SmtpScript | 'forward', forwardTo?: string): Promise<ScriptedSmtp> {
  let connections = 0;
  let accepted = 0;
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => undefined);
    connections += 1;
    const script = scriptFor(connections);
    if (script === 'forward') {
      if (!forwardTo) throw new Error('a forwarded connection needs forwardTo');
      const at = forwardTo.lastIndexOf(':');
      const upstream = connect(Number(forwardTo.slice(at + 1)), forwardTo.slice(0, at));
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      upstream.on('error', () => socket.destroy());
      socket.pipe(upstream).pipe(socket);
      socket.on('close', () => upstream.destroy());
      return;
    }
    converse(socket, { ...DEFAULTS, ...script }, () => (accepted += 1));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    connections: () => connections,
    accepted: () => accepted,
    settings: (overrides = {}) => ({ host: '127.0.0.1', port, tls: 'none', from: 'License Server <alerts@license.example>', connectTimeoutSeconds: 5, ...overrides }),
    async close() {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function converse(socket: Socket, script: Required<SmtpScript>, onAccepted: () => void): void {
  /** Answers; false when the conversation ends here. */
  const answer = (reply: Reply): boolean => {
    if (reply === 'silent') return false;
    if (reply === 'reset') {
      socket.resetAndDestroy();
      return false;
    }
    if (reply === 'close') {
      socket.end();
      return false;
    }
    socket.write(`${reply}\r\n`, 'latin1');
    return true;
  };
  if (!answer(script.greeting)) return;
  let buffer = '';
  let inData = false;
  socket.setEncoding('latin1').on('data', (chunk: string) => {
    buffer += chunk;
    for (;;) {
      if (inData) {
        const end = buffer.indexOf('\r\n.\r\n');
        if (end === -1) return;
        buffer = buffer.slice(end + 5);
        inData = false;
        if (script.message.startsWith('250')) onAccepted();
        if (!answer(script.message)) return;
        continue;
      }
      const end = buffer.indexOf('\r\n');
      if (end === -1) return;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const verb = line.split(' ')[0]!.toUpperCase();
      const reply =
        verb === 'EHLO' || verb === 'HELO' ? script.ehlo
        : verb === 'STARTTLS' ? script.starttls
        : verb === 'AUTH' ? script.auth
        : verb === 'MAIL' ? script.mail
        : verb === 'RCPT' ? script.rcpt
        : verb === 'DATA' ? script.data
        : verb === 'QUIT' ? '221 2.0.0 Bye'
        : verb === 'RSET' || verb === 'NOOP' ? '250 2.0.0 Ok'
        : '502 5.5.2 Error: command not recognized';
      if (!answer(reply)) return;
      if (verb === 'DATA' && reply.startsWith('354')) inData = true;
      if (verb === 'STARTTLS' && reply.startsWith('2')) {
        // No TLS server here: what follows is no handshake, as from a middlebox that took the 220.
        socket.write('this is not a TLS server hello\r\n');
        return;
      }
      if (verb === 'QUIT') return void socket.end();
    }
  });
}
