import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Socket } from 'node:net';
import path from 'node:path';
import { Readable, addAbortSignal } from 'node:stream';
import type { Client, ConnectConfig, FileEntryWithStats, ServerHostKeyAlgorithm, SFTPWrapper, Stats } from 'ssh2';
import { fingerprintProblem, knownHostKeyTypes, verifyHostKey } from './sftp-host-key.js';
import { TargetError, type BackupTarget, type PutOptions, type StoredObject, type TargetFailure } from './target.js';

/**
 * The SFTP target: a directory on an SSH server, reached with ssh2 (the pure-JS SSH client;
 * its optional native crypto is not built). One SSH connection per target, opened on first
 * use and reused; every request is answered within the target's timeout, or the connection
 * is given up. Uploads go to `.tmp-<started ms>-<random>-<key>`, are fsynced
 * (fsync@openssh.com) and renamed over the key (posix-rename@openssh.com, atomic), so a key
 * only ever names a complete file, and clearDebris can tell an old temporary file from one a
 * running upload writes.
 */
export interface SftpTargetOptions {
  readonly name: string;
  readonly host: string;
  readonly port: number;
  readonly user: string;
  /** OpenSSH or PEM private key file content. */
  readonly privateKey: Buffer;
  readonly passphrase?: string;
  /** The server's host key, pinned: SHA256 fingerprints as `ssh-keygen -lf` prints them ("SHA256:base64..."), or the text of a known_hosts file. */
  readonly hostKey: { readonly fingerprints: readonly string[] } | { readonly knownHosts: string };
  /** An absolute path on the server; it must already exist and is never created. */
  readonly directory: string;
  /** For connecting (ssh2's readyTimeout), and for any request the server leaves unanswered. */
  readonly timeoutSeconds: number;
}

const TEMPORARY = /^\.tmp-(\d+)-/;

/**
 * Writes in flight at once, and their size: 64 in flight, as OpenSSH's sftp client keeps,
 * keep a slow link busy. ssh2 splits a write larger than the server takes (OpenSSH takes
 * 255 KiB, ssh2 assumes about 32 KiB of others) into pieces sent one after the other, so 64 KiB costs such a
 * server nothing and saves OpenSSH half the requests. bench/sftp-upload.mjs, 512 MiB on
 * loopback (two cores), pure-JS ssh2: 32 KiB 0.83x sftp's speed, 64 KiB 0.88-0.94x (both
 * with the socket corked, below); 128 KiB x 32 and 255 KiB x 8 no better.
 */
const WRITE_BYTES = 64 * 1024;
const WRITES_IN_FLIGHT = 64;
/** Bytes one read request asks for (ssh2 splits it to the server's limit). */
const READ_BYTES = 256 * 1024;

/** SFTP status codes: draft-ietf-secsh-filexfer-02 section 7; 14 and 15 from later drafts, which some servers send anyway. */
const STATUS = { noSuchFile: 2, permissionDenied: 3, failure: 4, noConnection: 6, connectionLost: 7, noSpace: 14, quotaExceeded: 15 } as const;

const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ECONNABORTED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ENETDOWN', 'ENOTFOUND', 'EAI_AGAIN', 'EPIPE']);

/** The ssh2 host key algorithms a known_hosts key type can be shown with. */
const HOST_KEY_ALGORITHMS: Record<string, readonly ServerHostKeyAlgorithm[]> = {
  'ssh-ed25519': ['ssh-ed25519'],
  'ecdsa-sha2-nistp256': ['ecdsa-sha2-nistp256'],
  'ecdsa-sha2-nistp384': ['ecdsa-sha2-nistp384'],
  'ecdsa-sha2-nistp521': ['ecdsa-sha2-nistp521'],
  'ssh-rsa': ['rsa-sha2-512', 'rsa-sha2-256', 'ssh-rsa'],
};

export function openSftpTarget(options: SftpTargetOptions): BackupTarget {
  if (!path.posix.isAbsolute(options.directory)) {
    throw new TypeError(`sftp target ${options.name}: directory must be an absolute path, not ${JSON.stringify(options.directory)}`);
  }
  if (!(options.timeoutSeconds > 0)) throw new TypeError(`sftp target ${options.name}: timeoutSeconds must be positive`);
  const problem = 'fingerprints' in options.hostKey ? fingerprintProblem(options.hostKey.fingerprints) : undefined;
  if (problem !== undefined) throw new TargetError(options.name, 'host-key', problem);
  return new SftpTarget(options);
}

/** One SSH connection and its SFTP channel. */
class Session {
  /** The connection is gone: closed by the server, the network, or by us. */
  dropped = false;
  /** Set when we gave the connection up because the server left a request unanswered. */
  timedOut: TargetError | undefined;
  /** What ssh2 said ended the connection (a keepalive timeout, a reset): more telling than its pending requests' "No response from server". */
  lostWith: Error | undefined;

  constructor(
    private readonly target: SftpTarget,
    readonly client: Client,
    readonly socket: Socket,
    readonly sftp: SFTPWrapper,
  ) {}

  /**
   * Holds back what ssh2 writes to the socket until this tick ends, then writes it in one
   * go: ssh2 writes every SSH packet (32 KiB at most, OpenSSH's channel limit) on its own,
   * and a system call and a segment per packet cost an upload a fifth of its speed
   * (bench/sftp-upload.mjs: 0.74x sftp's speed uncorked, 0.88-0.94x corked).
   */
  corkForThisTick(): void {
    if (this.socket.writableCorked) return;
    this.socket.cork();
    process.nextTick(() => this.socket.uncork());
  }

  /** Gives the connection up: whatever it was doing is in an unknown state. */
  timeout(doing: string): TargetError {
    this.timedOut ??= this.target.error('timeout', `${doing}: no answer within ${this.target.timeoutMs / 1000} s`);
    this.dropped = true;
    this.client.destroy();
    return this.timedOut;
  }

  /** One request, answered within the timeout or the connection is given up. */
  ask<T>(doing: string, send: (done: (error: Error | null | undefined, value?: T) => void) => void): Promise<T> {
    if (this.timedOut) return Promise.reject(this.timedOut);
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => reject(this.timeout(doing)), this.target.timeoutMs);
      const done = (error: Error | null | undefined, value?: T) => {
        clearTimeout(timer);
        if (error) reject(error);
        else resolve(value as T);
      };
      try {
        send(done);
      } catch (error) {
        done(error as Error);
      }
    });
  }
}

/** Fires when requests are outstanding and none has been answered for the timeout. */
class Stall {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly ms: number,
    private readonly fire: () => void,
  ) {}

  arm(): void {
    this.timer ??= setTimeout(this.fire, this.ms);
  }

  answered(): void {
    this.timer?.refresh();
  }

  disarm(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }
}

interface SshError extends Error {
  code?: number | string;
  level?: string;
}

/** The server does not offer an `@openssh.com` extension: ssh2 says so by throwing at once. */
function notOffered(error: unknown): boolean {
  return error instanceof Error && error.message === 'Server does not support this extended request';
}

function isConnectionLoss(error: unknown): boolean {
  const { code, level, message } = error as SshError;
  return (
    message === 'No response from server' ||
    level === 'client-socket' ||
    code === STATUS.noConnection ||
    code === STATUS.connectionLost ||
    (typeof code === 'string' && UNREACHABLE_CODES.has(code))
  );
}

/**
 * Why an SSH or SFTP error failed the target, or undefined when it is not one (a body's own
 * error, an abort, a bug): those are passed on as they are.
 */
function reasonOf(error: unknown, writing: boolean): TargetFailure | undefined {
  if (!(error instanceof Error)) return undefined;
  const { code, level, message } = error as SshError;
  if (/no space left|quota|disk full/i.test(message)) return 'full';
  if (level === 'client-timeout' || code === 'ETIMEDOUT') return 'timeout';
  if (level === 'client-authentication') return 'auth';
  if (level === 'client-dns' || isConnectionLoss(error)) return 'unreachable';
  if (typeof code === 'number') {
    if (code === STATUS.noSuchFile) return 'missing';
    if (code === STATUS.permissionDenied) return 'auth';
    if (code === STATUS.noSpace || code === STATUS.quotaExceeded) return 'full';
    // OpenSSH's sftp-server answers every errno it has no code for, ENOSPC and EDQUOT among them, with FAILURE.
    if (code === STATUS.failure && writing) return 'full';
    return 'protocol';
  }
  if (level === 'protocol' || level === 'handshake') return 'protocol';
  return undefined;
}

function describe(error: unknown, reason: TargetFailure, writing: boolean): string {
  const message = error instanceof Error ? error.message : String(error);
  if (reason === 'full' && writing) return `${message} (a write failed: the server's disk or quota is most likely full)`;
  return message;
}

function checkKey(key: string): void {
  if (key === '' || key === '.' || key === '..' || key.includes('/') || key.includes('\0') || TEMPORARY.test(key)) {
    throw new RangeError(`not a target key: ${JSON.stringify(key)}`);
  }
}

class SftpTarget implements BackupTarget {
  readonly kind = 'sftp' as const;
  readonly name: string;
  readonly location: string;
  readonly timeoutMs: number;
  private readonly directory: string;
  private current: Promise<Session> | undefined;
  private closed = false;

  constructor(private readonly options: SftpTargetOptions) {
    this.name = options.name;
    this.timeoutMs = options.timeoutSeconds * 1000;
    this.directory = options.directory.length > 1 ? options.directory.replace(/\/+$/, '') : options.directory;
    const host = options.host.includes(':') ? `[${options.host}]` : options.host;
    this.location = `sftp://${options.user}@${host}:${options.port}${this.directory}`;
  }

  error(reason: TargetFailure, detail: string, cause?: unknown): TargetError {
    return new TargetError(this.name, reason, `${this.location}: ${detail}`, cause === undefined ? undefined : { cause });
  }

  /** The TargetError an SSH or SFTP error means; anything else is passed on as it is. */
  private failure(error: unknown, doing: string, session?: Session, writing = false): unknown {
    if (error instanceof TargetError) return error;
    if (session && isConnectionLoss(error)) {
      if (session.timedOut) return session.timedOut;
      error = session.lostWith ?? error;
    }
    const reason = reasonOf(error, writing);
    if (reason === undefined) return error;
    return this.error(reason, `${doing}: ${describe(error, reason, writing)}`, error);
  }

  private file(name: string): string {
    return path.posix.join(this.directory, name);
  }

  async check(): Promise<void> {
    await this.use('checking the directory', async (session) => {
      const stats = await session.ask<Stats>(`checking ${this.directory}`, (done) => session.sftp.stat(this.directory, done));
      if (!stats.isDirectory()) throw this.error('missing', `${this.directory} is not a directory`);
    });
  }

  async put(key: string, body: () => Readable, size: number, options: PutOptions = {}): Promise<void> {
    checkKey(key);
    await this.use(`uploading ${key}`, (session) => this.upload(session, key, body, size, options));
  }

  private async upload(session: Session, key: string, body: () => Readable, size: number, { signal, onProgress }: PutOptions): Promise<void> {
    signal?.throwIfAborted();
    const { sftp } = session;
    const temporary = this.file(`.tmp-${Date.now()}-${randomBytes(4).toString('hex')}-${key}`);
    const handle = await session.ask<Buffer>(`creating ${temporary}`, (done) => sftp.open(temporary, 'w', { mode: 0o600 }, done));
    let open = true;
    try {
      await this.writeAll(session, temporary, handle, body(), size, signal, onProgress);
      const doing = `writing ${temporary}`;
      await session
        .ask<void>(`fsync of ${temporary}`, (done) => {
          try {
            sftp.ext_openssh_fsync(handle, (error) => done(error));
          } catch (error) {
            if (!notOffered(error)) throw error;
            done(undefined);
          }
        })
        .catch((error: unknown) => Promise.reject(this.failure(error, doing, session, true)));
      open = false;
      await session.ask<void>(`closing ${temporary}`, (done) => sftp.close(handle, done)).catch((error: unknown) => Promise.reject(this.failure(error, doing, session, true)));
      signal?.throwIfAborted();
      await this.rename(session, temporary, this.file(key));
    } catch (error) {
      if (!session.dropped) {
        if (open) await session.ask<void>(`closing ${temporary}`, (done) => sftp.close(handle, done)).catch(() => undefined);
        await session.ask<void>(`removing ${temporary}`, (done) => sftp.unlink(temporary, done)).catch(() => undefined);
      }
      throw error;
    }
  }

  /**
   * Sends the body in writes of WRITE_BYTES, at most WRITES_IN_FLIGHT unanswered: the body
   * is read only as fast as the server answers, so memory stays bounded whatever its size.
   */
  private async writeAll(session: Session, temporary: string, handle: Buffer, body: Readable, size: number, signal: AbortSignal | undefined, onProgress: ((bytes: number) => void) | undefined): Promise<void> {
    const doing = `writing ${temporary}`;
    let sent = 0;
    let written = 0;
    let inFlight = 0;
    let failed: unknown;
    let wake: (() => void) | undefined;
    const wakeUp = () => {
      const waiting = wake;
      wake = undefined;
      waiting?.();
    };
    // Stops the wait for the body's next chunk, which may be long in coming and cannot be
    // interrupted (an async generator finishes its await before it stops). Not a race against
    // one long-lived promise: every race would leave a reaction on it, holding its chunk.
    let stopWaiting: ((error: unknown) => void) | undefined;
    const fail = (error: unknown) => {
      if (failed !== undefined) return;
      failed = error;
      stopWaiting?.(error);
      wakeUp();
    };
    const stall = new Stall(this.timeoutMs, () => fail(session.timeout(doing)));
    const abort = () => fail(signal!.reason);
    signal?.addEventListener('abort', abort, { once: true });
    const until = async (ready: () => boolean) => {
      while (failed === undefined && !ready()) await new Promise<void>((resolve) => (wake = resolve));
      if (failed !== undefined) throw failed;
    };
    const send = (piece: Buffer, offset: number) => {
      inFlight += 1;
      stall.arm();
      session.corkForThisTick();
      session.sftp.write(handle, piece, 0, piece.length, offset, (error) => {
        inFlight -= 1;
        if (inFlight === 0) stall.disarm();
        else stall.answered();
        if (error) return fail(this.failure(error, doing, session, true));
        written += piece.length;
        onProgress?.(written);
        wakeUp();
      });
    };
    const chunks: AsyncIterator<unknown> = body[Symbol.asyncIterator]();
    try {
      for (;;) {
        const next = chunks.next();
        next.catch(() => undefined);
        const { done, value: chunk } = await new Promise<IteratorResult<unknown>>((resolve, reject) => {
          stopWaiting = reject;
          next.then(resolve, reject);
        });
        stopWaiting = undefined;
        if (failed !== undefined) throw failed;
        if (done) break;
        const data = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array);
        if (sent + data.length > size) throw this.error('protocol', `the body is longer than its size, ${size} bytes`);
        for (let at = 0; at < data.length; at += WRITE_BYTES) {
          await until(() => inFlight < WRITES_IN_FLIGHT);
          const piece = data.subarray(at, at + WRITE_BYTES);
          send(piece, sent);
          sent += piece.length;
        }
      }
      await until(() => inFlight === 0);
      if (sent !== size) throw this.error('protocol', `the body ended after ${sent} of its ${size} bytes`);
    } finally {
      stall.disarm();
      signal?.removeEventListener('abort', abort);
      body.destroy();
    }
  }

  /** Renames over `to` atomically with posix-rename@openssh.com; without it, removes `to` first (not atomic, the best SFTP v3 offers). */
  private async rename(session: Session, from: string, to: string): Promise<void> {
    const { sftp } = session;
    const doing = `renaming to ${to}`;
    const atomic = await session
      .ask<boolean>(doing, (done) => {
        try {
          sftp.ext_openssh_rename(from, to, (error) => done(error, true));
        } catch (error) {
          if (!notOffered(error)) throw error;
          done(undefined, false);
        }
      })
      .catch((error: unknown) => Promise.reject(this.failure(error, doing, session)));
    if (atomic) return;
    await this.removeFile(session, to);
    await session.ask<void>(doing, (done) => sftp.rename(from, to, done)).catch((error: unknown) => Promise.reject(this.failure(error, doing, session)));
  }

  async get(key: string, options: { readonly signal?: AbortSignal } = {}): Promise<Readable> {
    checkKey(key);
    options.signal?.throwIfAborted();
    const file = this.file(key);
    return this.use(`reading ${key}`, async (session) => {
      const handle = await session.ask<Buffer>(`opening ${file}`, (done) => session.sftp.open(file, 'r', done));
      return this.readStream(session, file, handle, options.signal);
    });
  }

  /**
   * ssh2's read stream, behind one that maps its errors to TargetErrors and gives the
   * connection up when a read the consumer waits for is not answered within the timeout
   * (while the consumer is not reading, nothing is asked, and nothing times out).
   */
  private readStream(session: Session, file: string, handle: Buffer, signal: AbortSignal | undefined): Readable {
    const doing = `reading ${file}`;
    const source = session.sftp.createReadStream(file, { handle, highWaterMark: READ_BYTES, autoClose: true });
    const stall = new Stall(this.timeoutMs, () => out.destroy(session.timeout(doing)));
    const out = new Readable({
      highWaterMark: READ_BYTES,
      read() {
        stall.arm();
        source.resume();
      },
      destroy(error, callback) {
        stall.disarm();
        source.destroy();
        callback(error);
      },
    });
    source.on('data', (chunk: Buffer) => {
      stall.disarm();
      if (!out.push(chunk)) source.pause();
    });
    source.on('end', () => {
      stall.disarm();
      out.push(null);
    });
    source.on('error', (error: Error) => out.destroy(this.failure(error, doing, session) as Error));
    if (signal) addAbortSignal(signal, out);
    return out;
  }

  async stat(key: string): Promise<StoredObject | undefined> {
    checkKey(key);
    const file = this.file(key);
    return this.use(`checking ${key}`, async (session) => {
      const stats = await session.ask<Stats>(`checking ${file}`, (done) => session.sftp.lstat(file, done)).catch((error: unknown) => {
        if ((error as SshError).code === STATUS.noSuchFile) return undefined;
        throw error;
      });
      return stats?.isFile() ? { key, size: stats.size, modified: new Date(stats.mtime * 1000) } : undefined;
    });
  }

  async list(prefix = ''): Promise<StoredObject[]> {
    const entries = await this.use('listing', (session) => this.readDirectory(session));
    return entries
      .filter(({ filename, attrs }) => attrs.isFile() && !TEMPORARY.test(filename) && filename.startsWith(prefix))
      .map(({ filename, attrs }) => ({ key: filename, size: attrs.size, modified: new Date(attrs.mtime * 1000) }));
  }

  private readDirectory(session: Session): Promise<FileEntryWithStats[]> {
    return session.ask<FileEntryWithStats[]>(`listing ${this.directory}`, (done) => session.sftp.readdir(this.directory, done));
  }

  async delete(key: string): Promise<void> {
    checkKey(key);
    await this.use(`removing ${key}`, (session) => this.removeFile(session, this.file(key)));
  }

  private async removeFile(session: Session, file: string): Promise<void> {
    await session.ask<void>(`removing ${file}`, (done) => session.sftp.unlink(file, done)).catch((error: unknown) => {
      if ((error as SshError).code !== STATUS.noSuchFile) throw error;
    });
  }

  async clearDebris(startedBefore: Date, key?: string): Promise<number> {
    return this.use('clearing debris', async (session) => {
      let removed = 0;
      for (const { filename } of await this.readDirectory(session)) {
        const started = TEMPORARY.exec(filename)?.[1];
        if (started === undefined || Number(started) >= startedBefore.getTime()) continue;
        // `.tmp-<ms>-<8 hex>-<key>`.
        if (key !== undefined && /^\.tmp-\d+-[0-9a-f]{8}-(.*)$/.exec(filename)?.[1] !== key) continue;
        await this.removeFile(session, this.file(filename));
        removed += 1;
      }
      return removed;
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    const current = this.current;
    this.current = undefined;
    const session = await current?.catch(() => undefined);
    if (!session || session.dropped) return;
    const closed = once(session.client, 'close').catch(() => undefined);
    session.client.end();
    await Promise.race([closed, new Promise((resolve) => setTimeout(resolve, 1000).unref())]);
  }

  /**
   * Runs `work` on the connection, opening it if there is none. When a connection that was
   * already open turns out to have dropped under the work, the work runs once more on a new
   * one (a put calls its body again, as the contract allows).
   */
  private async use<T>(doing: string, work: (session: Session) => Promise<T>): Promise<T> {
    for (let attempt = 1; ; attempt += 1) {
      const { session, reused } = await this.session();
      try {
        return await work(session);
      } catch (error) {
        const lostToSilence = session.timedOut !== undefined || (session.lostWith !== undefined && reasonOf(session.lostWith, false) === 'timeout');
        if (attempt === 1 && reused && session.dropped && !lostToSilence && isConnectionLoss(error instanceof TargetError ? error.cause : error)) continue;
        throw this.failure(error, doing, session);
      }
    }
  }

  private async session(): Promise<{ session: Session; reused: boolean }> {
    if (this.closed) throw new Error(`target ${this.name} is closed`);
    const current = this.current;
    if (current) {
      // A connection still being opened is shared, its failure too.
      const session = await current;
      if (!session.dropped) return { session, reused: true };
      if (this.current === current) this.current = undefined;
      if (this.current) return this.session();
    }
    const connecting = this.connect();
    this.current = connecting;
    try {
      return { session: await connecting, reused: false };
    } catch (error) {
      if (this.current === connecting) this.current = undefined;
      throw error;
    }
  }

  private async connect(): Promise<Session> {
    const { Client } = await import('ssh2');
    const { host, port, user, privateKey, passphrase, hostKey } = this.options;
    const client = new Client();
    // Our own socket, so that writes can be corked (corkForThisTick). ssh2 waits for it to
    // connect and reports its errors; this listener only keeps an error after a failed start from going unhandled.
    const socket = new Socket().on('error', () => undefined);
    // Requests wait for their answers: Nagle's algorithm would hold each small one back for the last ACK.
    socket.setNoDelay(true);
    let refused: string | undefined;
    const config: ConnectConfig = {
      sock: socket,
      username: user,
      privateKey,
      ...(passphrase === undefined ? {} : { passphrase }),
      readyTimeout: this.timeoutMs,
      // A server that vanishes without a word (a dropped network) ends the connection instead of leaving it hanging.
      keepaliveInterval: Math.max(1000, Math.floor(this.timeoutMs / 3)),
      keepaliveCountMax: 3,
      hostVerifier: (key: Buffer) => {
        const verdict = verifyHostKey(hostKey, host, port, key);
        if (!verdict.accepted) refused = verdict.why;
        return verdict.accepted;
      },
    };
    if ('knownHosts' in hostKey) {
      const preferred = knownHostKeyTypes(hostKey.knownHosts, host, port).flatMap((type) => HOST_KEY_ALGORITHMS[type] ?? []);
      if (preferred.length > 0) config.algorithms = { serverHostKey: { remove: preferred, prepend: preferred, append: [] } };
    }
    return new Promise<Session>((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const fail = (error: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.destroy();
        socket.destroy();
        if (refused !== undefined) return reject(this.error('host-key', `${refused}; refused`));
        const failure = this.failure(error, `connecting to ${host}:${port}`);
        reject(failure instanceof TargetError ? failure : this.error('unreachable', `connecting to ${host}:${port}: ${(error as Error).message}`, error));
      };
      // Kept for the connection's whole life: a later error must not go unhandled.
      client.on('error', fail);
      client.on('close', () => fail(Object.assign(new Error('the server closed the connection'), { level: 'client-socket' })));
      client.once('ready', () => {
        timer = setTimeout(() => fail(Object.assign(new Error('no SFTP session within the timeout'), { level: 'client-timeout' })), this.timeoutMs);
        client.sftp((error, sftp) => {
          if (error) return fail(error);
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          const session = new Session(this, client, socket, sftp);
          // What an answer sets off is corked too: ssh2 sends the packets a window adjust
          // frees, and the next writes go out, while it handles the answer (before its own listener).
          socket.prependListener('data', () => session.corkForThisTick());
          const drop = () => (session.dropped = true);
          client.on('close', drop).on('end', drop).on('error', (error: Error) => {
            session.lostWith ??= error;
            drop();
          });
          sftp.on('close', drop).on('end', drop);
          resolve(session);
        });
      });
      socket.connect({ host, port });
      try {
        client.connect(config);
      } catch (error) {
        // ssh2 parses the key here: a wrong passphrase or an unreadable key says so without showing either.
        fail(Object.assign(new Error(`the private key cannot be used: ${(error as Error).message}`), { level: 'client-authentication' }));
      }
    });
  }
}
