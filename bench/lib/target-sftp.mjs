#!/usr/bin/env node
// The SFTP target's put of a 1 GiB archive, beside OpenSSH's own `sftp` client putting the
// same file to the same sshd, in the same run (issue 26, section 9):
//
//   npm run build && node bench/backup.mjs --target sftp [--mib 1024] [--runs 3] [--get] [--ways 'target put,sftp put']
//
// The sshd is Debian's OpenSSH server from test/support/sshd.ts (hence tsx), on loopback; its
// directory is under TMPDIR (set TMPDIR=/dev/shm to leave the disk out). Each upload runs as a
// process of its own under /usr/bin/time, for wall time and peak RSS, round by round so that
// machine noise hits every way alike; the medians are compared. The file is random bytes, as
// an encrypted archive is. The ways:
//   target put        openSftpTarget().put() of the file read in 1 MiB chunks: 64 KiB writes, 64 in
//                     flight, fsync@openssh.com, posix-rename
//   sftp put          OpenSSH sftp(1), its defaults (32 KiB requests, 64 in flight), no fsync
//   sftp put -f       the same, with fsync@openssh.com, as the target does
//   ssh2 write stream ssh2's sftp.createWriteStream() piped from the file: one write in flight
//   ssh2 fastPut      ssh2's sftp.fastPut(): 64 writes of 32 KiB in flight
// --get adds the reads back (target get, sftp get), which every copy is checked with.
// Goal: target put at least 0.9x the speed of sftp put, peak RSS under 200 MiB.
import { spawnSync } from 'node:child_process';
import { createReadStream, createWriteStream, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath } from 'node:url';

const MiB = 1024 * 1024;
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const self = fileURLToPath(import.meta.url);

if (process.argv[2] === '--child') await child(JSON.parse(process.argv[3]));
else await main();

/** One upload or download in this process, which /usr/bin/time measures. */
async function child({ way, server, file, name, size }) {
  const options = {
    name: 'bench',
    host: server.host,
    port: server.port,
    user: server.user,
    privateKey: readFileSync(server.keyFile),
    hostKey: { fingerprints: [server.hostKeyFingerprint] },
    directory: server.directory,
    timeoutSeconds: 30,
  };
  if (way === 'target put' || way === 'target get') {
    const { openSftpTarget } = await import('../../dist/lib/backup/targets/sftp.js');
    const target = openSftpTarget(options);
    // 1 MiB reads, as the backup code should read an archive: 64 KiB ones (the default) cost 15% more CPU.
    if (way === 'target put') await target.put(name, () => createReadStream(file, { highWaterMark: MiB }), size);
    else await pipeline(await target.get(name), createWriteStream(file));
    await target.close();
    return;
  }
  const { Client } = await import('ssh2');
  const client = new Client();
  await new Promise((resolve, reject) => {
    client.once('ready', resolve).once('error', reject);
    client.connect({ host: options.host, port: options.port, username: options.user, privateKey: options.privateKey, hostVerifier: () => true });
    client.setNoDelay(true); // as the target does
  });
  const sftp = await new Promise((resolve, reject) => client.sftp((error, value) => (error ? reject(error) : resolve(value))));
  const remote = `${server.directory}/${name}`;
  if (way === 'ssh2 write stream') await pipeline(createReadStream(file), sftp.createWriteStream(remote));
  else await new Promise((resolve, reject) => sftp.fastPut(file, remote, (error) => (error ? reject(error) : resolve())));
  client.end();
}

/** CPU seconds the whole machine spent busy (all processes, the sshd too), from /proc/stat. */
function machineBusySeconds() {
  const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).map(Number);
  const idle = fields[3] + fields[4];
  return (fields.slice(0, 8).reduce((a, b) => a + b, 0) - idle) / 100;
}

/** CPU seconds of the sshd processes that served connections and were reaped (cutime + cstime of the listener). */
function serverSeconds(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
  return (fields[13] + fields[14]) / 100;
}

function timed(argv) {
  const busy = machineBusySeconds();
  const result = spawnSync('/usr/bin/time', ['-f', '%e %M %U %S', ...argv], { encoding: 'utf8', maxBuffer: 64 * MiB });
  const [seconds, kib, user, system] = result.stderr.trim().split('\n').pop().split(' ').map(Number);
  if (result.status !== 0) throw new Error(`${argv.join(' ')} failed (${result.status}): ${result.stderr.slice(-2000)}`);
  return { seconds, rssMiB: kib / 1024, cpu: user + system, machine: machineBusySeconds() - busy };
}

async function main() {
  const { startSshd } = await import('../../test/support/sshd.ts');
  const mib = Number(arg('mib', '1024'));
  const runs = Number(arg('runs', '3'));
  const work = mkdtempSync(path.join(tmpdir(), 'license-bench-sftp-'));
  const sshd = await startSshd();
  try {
    const file = path.join(work, 'archive.bin');
    const out = createWriteStream(file);
    for (let i = 0; i < mib; i += 1) if (!out.write(randomBytes(MiB))) await new Promise((resolve) => out.once('drain', resolve));
    await new Promise((resolve, reject) => out.end((error) => (error ? reject(error) : resolve())));
    const size = statSync(file).size;
    const keyFile = path.join(work, 'client_key');
    writeFileSync(keyFile, sshd.privateKey, { mode: 0o600 });
    const knownHosts = path.join(work, 'known_hosts');
    writeFileSync(knownHosts, `${sshd.knownHostsLine}\n`);
    const server = { host: sshd.host, port: sshd.port, user: sshd.user, keyFile, hostKeyFingerprint: sshd.hostKeyFingerprint, directory: sshd.directory };
    const sftp = (command) => {
      const batch = path.join(work, 'batch');
      writeFileSync(batch, `${command}\n`);
      return ['sftp', '-q', '-b', batch, '-i', keyFile, '-o', `UserKnownHostsFile=${knownHosts}`, '-o', 'StrictHostKeyChecking=yes', '-o', 'IdentitiesOnly=yes', '-P', String(sshd.port), `${sshd.user}@127.0.0.1`];
    };
    const node = (way, name, target = file) => [process.execPath, self, '--child', JSON.stringify({ way, server, file: target, name, size })];
    const back = path.join(work, 'back.bin');
    const ways = {
      'target put': () => node('target put', 'target.bin'),
      'sftp put': () => sftp(`put ${file} ${sshd.directory}/sftp.bin`),
      'sftp put -f': () => sftp(`put -f ${file} ${sshd.directory}/sftp-f.bin`),
      'ssh2 write stream': () => node('ssh2 write stream', 'stream.bin'),
      'ssh2 fastPut': () => node('ssh2 fastPut', 'fastput.bin'),
      ...(process.argv.includes('--get')
        ? { 'target get': () => node('target get', 'target.bin', back), 'sftp get': () => sftp(`get ${sshd.directory}/sftp.bin ${back}`) }
        : {}),
    };
    const only = arg('ways')?.split(',');
    for (const way of Object.keys(ways)) if (only && !only.includes(way)) delete ways[way];
    const samples = Object.fromEntries(Object.keys(ways).map((way) => [way, []]));
    for (let round = 0; round < runs; round += 1) {
      for (const [way, argv] of Object.entries(ways)) {
        const serverBefore = serverSeconds(sshd.pid);
        const sample = timed(argv());
        // The server side of a connection can outlive its client for a while (sshd finishing
        // what it was sent): the next way must not share the machine with it, and its CPU
        // time is counted once sshd has reaped it.
        for (let waited = 0; sshd.connections().length > 0 && waited < 30_000; waited += 50) await new Promise((resolve) => setTimeout(resolve, 50));
        samples[way].push({ ...sample, server: serverSeconds(sshd.pid) - serverBefore });
        if (way.endsWith('put')) {
          const landed = statSync(path.join(sshd.localDirectory, { 'target put': 'target.bin', 'sftp put': 'sftp.bin', 'sftp put -f': 'sftp-f.bin', 'ssh2 write stream': 'stream.bin', 'ssh2 fastPut': 'fastput.bin' }[way])).size;
          if (landed !== size) throw new Error(`${way} left ${landed} bytes, not ${size}`);
        }
      }
    }
    const median = (values) => {
      const sorted = [...values].sort((a, b) => a - b);
      const mid = sorted.length >> 1;
      return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
    };
    console.log(`${mib} MiB, ${runs} runs per way, directory under ${tmpdir()}, node ${process.version}`);
    const speed = (way) => size / MiB / median(samples[way].map((s) => s.seconds));
    for (const way of Object.keys(ways)) {
      const rss = Math.max(...samples[way].map((s) => s.rssMiB));
      const cpu = median(samples[way].map((s) => s.cpu));
      console.log(`${way.padEnd(18)} ${speed(way).toFixed(0).padStart(5)} MiB/s (median of ${samples[way].map((s) => s.seconds.toFixed(2)).join(', ')} s), client CPU ${cpu.toFixed(2)} s, sshd CPU ${median(samples[way].map((s) => s.server)).toFixed(2)} s, machine CPU ${median(samples[way].map((s) => s.machine)).toFixed(2)} s, peak RSS ${rss.toFixed(0)} MiB`);
    }
    if (!ways['target put'] || !ways['sftp put']) return;
    const ratio = speed('target put') / speed('sftp put');
    const rss = Math.max(...samples['target put'].map((s) => s.rssMiB));
    console.log(`target put / sftp put: ${ratio.toFixed(2)}x (goal 0.9x); ${ways['sftp put -f'] ? `target put / sftp put -f: ${(speed('target put') / speed('sftp put -f')).toFixed(2)}x; ` : ''}peak RSS ${rss.toFixed(0)} MiB (goal < 200)`);
    if (ratio < 0.9 || rss >= 200) process.exitCode = 1;
  } finally {
    await sshd.stop();
    rmSync(work, { recursive: true, force: true });
  }
}
