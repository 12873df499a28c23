import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import path from 'node:path';
import { scaledMs } from './busy-machine.js';

/**
 * Debian's real OpenSSH server (/usr/sbin/sshd, package openssh-server) on a loopback port,
 * for the SFTP target's tests: in the foreground (-D -e), with its own config, its own fresh
 * Ed25519 host key, one authorized client key made for it, `Subsystem sftp internal-sftp`,
 * and a fresh empty directory for the target.
 *
 *   const sshd = await startSshd();
 *   openSftpTarget({ host: sshd.host, port: sshd.port, user: sshd.user, privateKey: sshd.privateKey,
 *                    hostKey: { fingerprints: [sshd.hostKeyFingerprint] }, directory: sshd.directory, ... });
 *   readdirSync(sshd.localDirectory);   // what the server holds, seen without SFTP
 *   sshd.connections();                 // pids of the sshd processes serving a connection now
 *   await sshd.stop();                  // kills them all, removes the keys and the directory
 *
 * `{ diskBytes }` puts the directory on a tmpfs of that size, mounted in a mount namespace
 * of the server's own (unshare), so that a write past it fails with ENOSPC in the kernel and
 * OpenSSH's sftp server answers it as it would on a full disk; the mount goes away with the
 * server. That needs root (smallDiskProblem() says why not).
 *
 * sshd has no port 0: a free port is found first, and another tried if it was taken meanwhile.
 * As root it needs /run/sshd (its privilege separation directory), made here; as another user
 * it runs without privilege separation and lets only that user in (UsePAM no), whose account
 * must not be locked: with a "!" password in /etc/shadow, as `nobody` has, sshd refuses it
 * even a key. Tried both ways; only the small disk needs root.
 */
export interface TestSshd {
  readonly host: '127.0.0.1';
  readonly port: number;
  readonly user: string;
  /** The authorized client key, OpenSSH format, no passphrase. */
  readonly privateKey: Buffer;
  /** As `ssh-keygen -lf` prints it: "SHA256:...". */
  readonly hostKeyFingerprint: string;
  /** "[127.0.0.1]:port ssh-ed25519 AAAA...", a known_hosts line for this server. */
  readonly knownHostsLine: string;
  /** The target directory, as the server sees it (absolute). */
  readonly directory: string;
  /** The same directory as node:fs in this process sees it. */
  readonly localDirectory: string;
  /** The listening sshd's pid. */
  readonly pid: number;
  /** The pids of the sshd processes serving one connection each, now. */
  connections(): number[];
  /** What sshd wrote to stderr, for a failing test's message. */
  log(): string;
  stop(): Promise<void>;
}

export interface SshdOptions {
  /** Puts the target directory on a tmpfs of this many bytes (root only). */
  readonly diskBytes?: number;
}

const SSHD = '/usr/sbin/sshd';

/** Resolves to undefined when sshd can be started here, or to the reason it cannot. */
export function sshdProblem(): string | undefined {
  if (!existsSync(SSHD)) return `${SSHD} is not installed (Debian package openssh-server)`;
  try {
    execFileSync('ssh-keygen', ['-?'], { stdio: 'ignore' });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return 'ssh-keygen is not installed (Debian package openssh-client)';
  }
  return undefined;
}

/** Why a small disk cannot be mounted for sshd here, or undefined. */
export function smallDiskProblem(): string | undefined {
  if (process.getuid?.() !== 0) return 'mounting a tmpfs needs root';
  if (!existsSync('/usr/bin/unshare')) return '/usr/bin/unshare is not installed (Debian package util-linux)';
  return undefined;
}

/**
 * Call from a `before` hook of every suite that needs sshd (with `{ diskBytes }` for a small
 * disk): under CI=true a server that cannot start fails the suite; elsewhere it skips it, loudly.
 */
export function requireSshd(context: Mocha.Context, options: SshdOptions = {}): void {
  const problem = sshdProblem() ?? (options.diskBytes === undefined ? undefined : smallDiskProblem());
  if (!problem) return;
  if (process.env.CI === 'true') throw new Error(`OpenSSH's sshd is required under CI=true: ${problem}`);
  console.warn(`    (skipping: ${problem})`);
  context.skip();
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

function keygen(file: string, comment: string): void {
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', comment, '-f', file], { stdio: 'ignore' });
}

/** The direct children of `pid`: sshd forks one per connection. */
function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      // pid (comm) state ppid ...: comm may hold spaces and parentheses, so count from the last ')'.
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {
      // the process ended while we looked
    }
  }
  return children;
}

/** `pid` and every process below it: a connection's monitor, and its session child that holds the socket. */
function withDescendants(pid: number): number[] {
  return [pid, ...childrenOf(pid).flatMap(withDescendants)];
}

function kill(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** Ends one connection as a crash or a dropped network would: its processes are killed, the server keeps listening. */
export function dropConnection(pid: number): void {
  for (const process of withDescendants(pid)) kill(process);
}

/** Stops (or with `resume`, continues) one connection's processes: the server still holds the TCP connection but answers nothing. */
export function freezeConnection(pid: number, resume = false): void {
  for (const process of withDescendants(pid)) kill(process, resume ? 'SIGCONT' : 'SIGSTOP');
}

function sshdConfig(dir: string, port: number, user: string): string {
  return [
    `Port ${port}`,
    'ListenAddress 127.0.0.1',
    `HostKey ${path.join(dir, 'host_ed25519')}`,
    `AuthorizedKeysFile ${path.join(dir, 'authorized_keys')}`,
    `AllowUsers ${user}`,
    'PidFile none',
    'StrictModes no',
    'UsePAM no',
    'PubkeyAuthentication yes',
    'PasswordAuthentication no',
    'KbdInteractiveAuthentication no',
    'PermitRootLogin prohibit-password',
    'Subsystem sftp internal-sftp',
    'LogLevel INFO',
    '',
  ].join('\n');
}

/** Starts sshd and resolves once it listens; rejects with its stderr if it exits first. */
async function launch(dir: string, port: number, disk: { directory: string; bytes: number } | undefined): Promise<{ child: ChildProcess; log: () => string }> {
  const config = path.join(dir, 'sshd_config');
  writeFileSync(config, sshdConfig(dir, port, userInfo().username));
  // sshd re-executes itself for every connection, so it must be started by its absolute path.
  const command: [string, string[]] = disk
    ? ['/usr/bin/unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', 'mount -t tmpfs -o "size=$2,mode=0755" license-server-test "$1" && exec "$3" -D -e -f "$4"', 'sh', disk.directory, String(disk.bytes), SSHD, config]]
    : [SSHD, ['-D', '-e', '-f', config]];
  const child = spawn(command[0], command[1], { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.setEncoding('utf8');
  child.stderr!.on('data', (text: string) => {
    stderr = (stderr + text).slice(-20_000);
  });
  await new Promise<void>((resolve, reject) => {
    const limit = scaledMs(10_000);
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`sshd did not listen within ${limit} ms:\n${stderr}`));
    }, limit);
    const watch = () => {
      if (!stderr.includes(`Server listening on 127.0.0.1 port ${port}.`)) return;
      clearTimeout(timer);
      child.stderr!.off('data', watch);
      child.off('exit', exited);
      resolve();
    };
    const exited = (code: number | null, signal: string | null) => {
      clearTimeout(timer);
      reject(new Error(`sshd exited (${code ?? signal}) before listening:\n${stderr}`));
    };
    child.stderr!.on('data', watch);
    child.once('exit', exited);
    child.once('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
  });
  return { child, log: () => stderr };
}

export async function startSshd(options: SshdOptions = {}): Promise<TestSshd> {
  const problem = sshdProblem() ?? (options.diskBytes === undefined ? undefined : smallDiskProblem());
  if (problem) throw new Error(`sshd cannot start: ${problem}`);
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const dir = mkdtempSync(path.join(tmpdir(), 'license-server-sshd-'));
  const directory = path.join(dir, 'target');
  mkdirSync(directory);
  keygen(path.join(dir, 'host_ed25519'), 'license-server-test-host');
  keygen(path.join(dir, 'client_ed25519'), 'license-server-test-client');
  writeFileSync(path.join(dir, 'authorized_keys'), readFileSync(path.join(dir, 'client_ed25519.pub')));
  const hostPublic = readFileSync(path.join(dir, 'host_ed25519.pub'), 'utf8').trim();
  // The fingerprint as OpenSSH's own tool computes it, not as the code under test does.
  const hostKeyFingerprint = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', path.join(dir, 'host_ed25519.pub')], { encoding: 'utf8' }).split(' ')[1]!;
  const disk = options.diskBytes === undefined ? undefined : { directory, bytes: options.diskBytes };

  let started: { child: ChildProcess; log: () => string; port: number } | undefined;
  let lastError: unknown;
  for (let attempt = 0; attempt < 5 && !started; attempt += 1) {
    const port = await freePort();
    try {
      started = { ...(await launch(dir, port, disk)), port };
    } catch (error) {
      lastError = error;
      // Another process took the port between our look and sshd's bind: try another.
      if (!/Address already in use/.test(String(error))) break;
    }
  }
  if (!started) {
    rmSync(dir, { recursive: true, force: true });
    throw lastError;
  }
  const { child, log, port } = started;
  const pid = child.pid!;
  const [keyType, keyBase64] = hostPublic.split(' ');
  return {
    host: '127.0.0.1',
    port,
    user: userInfo().username,
    privateKey: readFileSync(path.join(dir, 'client_ed25519')),
    hostKeyFingerprint,
    knownHostsLine: `[127.0.0.1]:${port} ${keyType} ${keyBase64}`,
    directory,
    // A mount made in sshd's own namespace is seen through its root in /proc.
    localDirectory: disk ? `/proc/${pid}/root${directory}` : directory,
    pid,
    connections: () => childrenOf(pid),
    log,
    async stop() {
      const connections = childrenOf(pid);
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.kill('SIGTERM');
        await exited;
      }
      // A listener's exit leaves its connections running: they are ended too.
      for (const process of connections.flatMap(withDescendants)) kill(process);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
