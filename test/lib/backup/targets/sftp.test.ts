import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { openSftpTarget, type SftpTargetOptions } from '../../../../src/lib/backup/targets/sftp.js';
import { isTargetError, type BackupTarget } from '../../../../src/lib/backup/targets/target.js';
import { startBlackHole } from '../../../support/black-hole.js';
import { dropConnection, freezeConnection, requireSshd, startSshd, type TestSshd } from '../../../support/sshd.js';
import { chunked, failure, readAll, sha256, targetContract } from './contract.js';

function optionsFor(sshd: TestSshd, overrides: Partial<SftpTargetOptions> = {}): SftpTargetOptions {
  return {
    name: 'offsite',
    host: sshd.host,
    port: sshd.port,
    user: sshd.user,
    privateKey: sshd.privateKey,
    hostKey: { fingerprints: [sshd.hostKeyFingerprint] },
    directory: sshd.directory,
    timeoutSeconds: 10,
    ...overrides,
  };
}

/** The error a failing call threw, which must be a TargetError. */
async function targetError(work: Promise<unknown>): Promise<Error & { reason: string }> {
  const error = await work.then(
    () => assert.fail('expected the target to fail'),
    (error: unknown) => error,
  );
  assert.ok(isTargetError(error), `expected a TargetError, got ${String(error)}`);
  return error;
}

/** A free loopback port nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

describe('the sftp target, against OpenSSH sshd', function () {
  this.timeout(60_000);
  let servers: TestSshd[] = [];
  let targets: BackupTarget[] = [];
  const sshd = async (options?: { diskBytes?: number }) => {
    const server = await startSshd(options);
    servers.push(server);
    return server;
  };
  const open = (options: SftpTargetOptions) => {
    const target = openSftpTarget(options);
    targets.push(target);
    return target;
  };
  const scratch = mkdtempSync(path.join(tmpdir(), 'license-server-sftp-test-'));

  before(function () {
    requireSshd(this);
  });
  afterEach(async () => {
    await Promise.all(targets.map((target) => target.close()));
    await Promise.all(servers.map((server) => server.stop()));
    targets = [];
    servers = [];
  });
  after(() => rmSync(scratch, { recursive: true, force: true }));

  targetContract('sftp', async () => {
    const server = await sshd();
    return { target: open(optionsFor(server)), raw: async () => readdirSync(server.localDirectory).sort() };
  });

  it('refuses a changed host key (another server\'s pinned), naming the key it was shown, and writes nothing', async () => {
    const pinned = await sshd();
    const other = await sshd();
    const target = open(optionsFor(other, { hostKey: { fingerprints: [pinned.hostKeyFingerprint] } }));
    const error = await targetError(target.check());
    assert.equal(error.reason, 'host-key');
    assert.match(error.message, new RegExp(other.hostKeyFingerprint.replace(/[+/]/g, '\\$&')));
    assert.equal(await failure(target.put('a.backup.json', chunked(Buffer.from('{}')), 2)), 'host-key');
    assert.deepEqual(readdirSync(other.localDirectory), []);
    // The refused server never saw the client try its key.
    assert.doesNotMatch(other.log(), /Accepted publickey|Failed publickey/);
  });

  it('accepts a known_hosts file with a plain entry, and with a hashed one (ssh-keygen -H)', async () => {
    const server = await sshd();
    const plain = `# pinned for the test\n[127.0.0.1]:1 ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBnWV5uKINNuWvuq63p37AymfpsyR8zkeTEWPJTCscl4\n${server.knownHostsLine}\n`;
    const target = open(optionsFor(server, { hostKey: { knownHosts: plain } }));
    await target.check();
    await target.put('plain.backup.json', chunked(Buffer.from('plain')), 5);

    const file = path.join(scratch, 'known_hosts');
    writeFileSync(file, `${server.knownHostsLine}\n`);
    execFileSync('ssh-keygen', ['-H', '-f', file], { stdio: 'ignore' });
    const hashed = readFileSync(file, 'utf8');
    assert.match(hashed, /^\|1\|[^ |]+\|[^ ]+ ssh-ed25519 /);
    assert.ok(!hashed.includes('127.0.0.1'));
    const hashedTarget = open(optionsFor(server, { hostKey: { knownHosts: hashed } }));
    await hashedTarget.put('hashed.backup.json', chunked(Buffer.from('hashed')), 6);
    assert.deepEqual((await hashedTarget.list()).map(({ key }) => key).sort(), ['hashed.backup.json', 'plain.backup.json']);
  });

  it('refuses a known_hosts file that pins another key for the server, names it only for another port, or marks its key @revoked', async () => {
    const server = await sshd();
    const other = await sshd();
    const [, type, key] = server.knownHostsLine.split(' ');
    const otherKey = other.knownHostsLine.split(' ').slice(1).join(' ');
    const cases = {
      changed: `[127.0.0.1]:${server.port} ${otherKey}\n`,
      'another port': `[127.0.0.1]:${other.port} ${type} ${key}\n127.0.0.1 ${type} ${key}\n`,
      revoked: `${server.knownHostsLine}\n@revoked * ${type} ${key}\n`,
    };
    for (const [what, knownHosts] of Object.entries(cases)) {
      const error = await targetError(open(optionsFor(server, { hostKey: { knownHosts } })).check());
      assert.equal(error.reason, 'host-key', what);
      assert.ok(error.message.includes(server.hostKeyFingerprint), `${what}: ${error.message}`);
    }
    assert.doesNotMatch(server.log(), /Accepted publickey/);
  });

  it('answers a client key the server does not know with "auth", and a wrong passphrase too, without either in the message', async () => {
    const server = await sshd();
    const keyFile = path.join(scratch, 'stranger');
    execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-f', keyFile], { stdio: 'ignore' });
    const stranger = readFileSync(keyFile);
    const error = await targetError(open(optionsFor(server, { privateKey: stranger })).check());
    assert.equal(error.reason, 'auth');
    assert.ok(!error.message.includes('PRIVATE KEY'));

    const locked = path.join(scratch, 'locked');
    writeFileSync(locked, server.privateKey, { mode: 0o600 });
    execFileSync('ssh-keygen', ['-q', '-p', '-P', '', '-N', 'correct horse battery', '-f', locked], { stdio: 'ignore' });
    const lockedKey = readFileSync(locked);
    await open(optionsFor(server, { privateKey: lockedKey, passphrase: 'correct horse battery' })).check();
    const wrong = await targetError(open(optionsFor(server, { privateKey: lockedKey, passphrase: 'wrong horse battery' })).check());
    assert.equal(wrong.reason, 'auth');
    assert.ok(!wrong.message.includes('horse'), wrong.message);
    assert.equal(await failure(open(optionsFor(server, { privateKey: Buffer.from('not a key') })).check()), 'auth');
  });

  it('answers "unreachable" when nothing listens on the port', async () => {
    const server = await sshd();
    const error = await targetError(open(optionsFor(server, { port: await closedPort() })).check());
    assert.equal(error.reason, 'unreachable', error.message);
  });

  it('answers "timeout" within the bound from a server that takes the connection and never speaks, and from one that never answers the SYN', async () => {
    const server = await sshd();
    const sockets = new Set<Socket>();
    const silent: Server = createServer((socket) => void sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const hole = await startBlackHole();
    try {
      for (const port of [(silent.address() as AddressInfo).port, Number(hole.addr.split(':')[1])]) {
        const started = Date.now();
        const error = await targetError(open(optionsFor(server, { port, timeoutSeconds: 1 })).check());
        const elapsed = Date.now() - started;
        assert.equal(error.reason, 'timeout', error.message);
        assert.ok(elapsed >= 900 && elapsed < 3000, `${elapsed} ms`);
      }
    } finally {
      hole.stop();
      for (const socket of sockets) socket.destroy();
      silent.close();
    }
  });

  it('answers "timeout" when the server stops answering in the middle of an upload, and of a listing', async () => {
    const server = await sshd();
    const target = open(optionsFor(server, { timeoutSeconds: 1 }));
    await target.check();
    const [connection] = server.connections();
    assert.ok(connection);
    let frozen = false;
    const body = () => Readable.from((async function* () {
      for (let i = 0; i < 64; i += 1) {
        if (i === 8) {
          freezeConnection(connection);
          frozen = true;
        }
        yield randomBytes(256 * 1024);
      }
    })());
    try {
      const started = Date.now();
      assert.equal(await failure(target.put('stuck.backup.tar.gz', body, 64 * 256 * 1024)), 'timeout');
      assert.ok(frozen);
      // The bound is 1 s; ssh2's keepalive, the backstop, would take 3 to 4.
      assert.ok(Date.now() - started < 2500, `${Date.now() - started} ms`);
    } finally {
      freezeConnection(connection, true);
    }

    const listing = open(optionsFor(server, { timeoutSeconds: 1 }));
    await listing.list();
    const [second] = server.connections().filter((pid) => pid !== connection);
    assert.ok(second);
    freezeConnection(second);
    try {
      const started = Date.now();
      assert.equal(await failure(listing.list()), 'timeout');
      assert.ok(Date.now() - started < 2500, `${Date.now() - started} ms`);
    } finally {
      freezeConnection(second, true);
    }
  });

  it('answers "missing" for a directory that is not there, and never creates it', async () => {
    const server = await sshd();
    const absent = path.join(server.directory, 'not-mounted', 'backups');
    const target = open(optionsFor(server, { directory: absent }));
    assert.equal(await failure(target.check()), 'missing');
    assert.equal(await failure(target.put('a.backup.json', chunked(Buffer.from('{}')), 2)), 'missing');
    assert.equal(await failure(target.list()), 'missing');
    assert.equal(existsSync(path.join(server.localDirectory, 'not-mounted')), false);
  });

  it('answers "full" when the server\'s disk fills during an upload, and leaves no temporary file', async function () {
    requireSshd(this, { diskBytes: 1 });
    const server = await sshd({ diskBytes: 1024 * 1024 });
    const target = open(optionsFor(server));
    await target.put('small.backup.json', chunked(Buffer.from('{"fits":true}')), 13);
    const data = randomBytes(4 * 1024 * 1024);
    const error = await targetError(target.put('big.backup.tar.gz', chunked(data), data.length));
    assert.equal(error.reason, 'full', error.message);
    assert.deepEqual(readdirSync(server.localDirectory), ['small.backup.json']);
    assert.deepEqual((await target.list()).map(({ key }) => key), ['small.backup.json']);
  });

  it('opens one connection, reuses it, and reconnects once when it dropped', async () => {
    const server = await sshd();
    const target = open(optionsFor(server));
    await target.put('a.backup.json', chunked(Buffer.from('first')), 5);
    await target.list();
    await target.stat('a.backup.json');
    const connections = server.connections();
    assert.equal(connections.length, 1);
    dropConnection(connections[0]!);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.deepEqual((await target.list()).map(({ key }) => key), ['a.backup.json']);
    assert.equal((await readAll(await target.get('a.backup.json'))).toString(), 'first');
    const now = server.connections();
    assert.equal(now.length, 1);
    assert.notEqual(now[0], connections[0]);
  });

  it('starts an upload over on a new connection when the one it began on drops, and leaves the first attempt as debris', async () => {
    const server = await sshd();
    const target = open(optionsFor(server));
    await target.check();
    const [first] = server.connections();
    assert.ok(first);
    const data = randomBytes(8 * 1024 * 1024);
    let calls = 0;
    const body = () => {
      calls += 1;
      const attempt = calls;
      return Readable.from((async function* () {
        for (let at = 0; at < data.length; at += 1024 * 1024) {
          if (attempt === 1 && at === 4 * 1024 * 1024) {
            dropConnection(first);
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
          yield data.subarray(at, at + 1024 * 1024);
        }
      })());
    };
    await target.put('20261126T000000000Z-abcdef.backup.tar.gz', body, data.length);
    assert.equal(calls, 2);
    assert.equal(sha256(await readAll(await target.get('20261126T000000000Z-abcdef.backup.tar.gz'))), sha256(data));
    const debris = readdirSync(server.localDirectory).filter((name) => name.startsWith('.tmp-'));
    assert.equal(debris.length, 1);
    assert.equal(await target.clearDebris(new Date()), 1);
    assert.deepEqual(readdirSync(server.localDirectory), ['20261126T000000000Z-abcdef.backup.tar.gz']);
  });

  it('lists only complete regular files, and clears only debris older than the cut-off', async () => {
    const server = await sshd();
    const target = open(optionsFor(server));
    const data = randomBytes(70_000);
    await target.put('20261126T000000000Z-abcdef.backup.tar.gz', chunked(data), data.length);
    const old = `.tmp-${Date.now() - 3_600_000}-0badc0de-20261125T000000000Z-aaaaaa.backup.tar.gz`;
    const recent = `.tmp-${Date.now() + 60_000}-0badc0de-20261127T000000000Z-bbbbbb.backup.tar.gz`;
    writeFileSync(path.join(server.localDirectory, old), 'half');
    writeFileSync(path.join(server.localDirectory, recent), 'half');
    writeFileSync(path.join(server.localDirectory, '.hidden-note'), 'kept');
    execFileSync('mkdir', [path.join(server.localDirectory, 'a-directory')]);
    assert.deepEqual((await target.list()).map(({ key }) => key).sort(), ['.hidden-note', '20261126T000000000Z-abcdef.backup.tar.gz']);
    assert.equal(await target.clearDebris(new Date()), 1);
    assert.deepEqual(readdirSync(server.localDirectory).sort(), ['.hidden-note', recent, '20261126T000000000Z-abcdef.backup.tar.gz', 'a-directory'].sort());
    assert.equal(sha256(readFileSync(path.join(server.localDirectory, '20261126T000000000Z-abcdef.backup.tar.gz'))), sha256(data));
  });

  it('refuses a pinned fingerprint that is not one (an MD5 one, a key, none) before connecting', async () => {
    const server = await sshd();
    for (const fingerprints of [['MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48'], [server.knownHostsLine.split(' ')[2]!], [], [server.hostKeyFingerprint, 'SHA256:short']]) {
      assert.throws(() => openSftpTarget(optionsFor(server, { hostKey: { fingerprints } })), (error: unknown) => isTargetError(error) && error.reason === 'host-key', JSON.stringify(fingerprints));
    }
    assert.equal(server.connections().length, 0);
    assert.doesNotMatch(server.log(), /Accepted|Connection/);
  });

  it('names where it is without a credential', async () => {
    const server = await sshd();
    const target = open(optionsFor(server, { passphrase: 'not-shown' }));
    assert.equal(target.location, `sftp://${server.user}@127.0.0.1:${server.port}${server.directory}`);
    assert.equal(target.kind, 'sftp');
  });
});
