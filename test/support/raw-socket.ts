import { connect, type Socket } from 'node:net';

export interface RawConnection {
  readonly socket: Socket;
  /** Everything received so far, as text. */
  received(): string;
  /** How many responses have started arriving (status lines seen). */
  responses(): number;
  /** Resolves once the socket is closed, whoever closed it. */
  readonly ended: Promise<void>;
  /** Resolves once at least `count` status lines have arrived (or the socket closed). */
  waitForResponses(count: number): Promise<void>;
}

/**
 * A raw TCP conversation with the daemon, for clients that misbehave on purpose: pipelining,
 * garbage, resets. fetch and node:http would tidy such requests up before sending them.
 */
export function rawConnection(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () => {
      socket.off('error', reject);
      let data = '';
      const waiters: Array<{ count: number; done: () => void }> = [];
      const statusLines = () => data.match(/HTTP\/1\.1 \d{3} /g)?.length ?? 0;
      const wake = (all: boolean) => {
        for (const waiter of [...waiters]) {
          if (all || statusLines() >= waiter.count) {
            waiters.splice(waiters.indexOf(waiter), 1);
            waiter.done();
          }
        }
      };
      // A reset or a refused write is what these tests provoke; it only ends the conversation.
      socket.on('error', () => undefined);
      socket.setEncoding('latin1').on('data', (chunk: string) => {
        data += chunk;
        wake(false);
      });
      const ended = new Promise<void>((done) =>
        socket.once('close', () => {
          wake(true);
          done();
        }),
      );
      resolve({
        socket,
        received: () => data,
        responses: statusLines,
        ended,
        waitForResponses: (count) =>
          new Promise<void>((done) => {
            if (statusLines() >= count || socket.destroyed) done();
            else waiters.push({ count, done });
          }),
      });
    });
    socket.once('error', reject);
  });
}

/** The JSON body of the first response in `text`. */
export function firstBody(text: string): any {
  const start = text.indexOf('\r\n\r\n') + 4;
  const length = Number(/content-length: (\d+)/i.exec(text)?.[1] ?? text.length - start);
  return JSON.parse(text.slice(start, start + length));
}

/** The request log lines (`"msg":"request"`) a serve process wrote to standard error. */
export function requestLog(stderr: string): Array<Record<string, any>> {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, any>)
    .filter((line) => line.msg === 'request');
}
