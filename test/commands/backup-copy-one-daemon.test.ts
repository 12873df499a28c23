import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, watch, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openTarget } from '../../src/lib/backup/targets/open.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { runCli } from '../support/cli.js';
import { plantBackup, timedCopy, withDeadline } from '../support/planted-backup.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';
import { freezeConnection, sshdProblem, startSshd, type TestSshd } from '../support/sshd.js';

const ARCHIVE_BYTES = 64 * 1024 * 1024;
const TOKEN = 'copy-one-daemon-token-0123456789abcdef';

/**
 * A daemon's own copier (copier.ts) and a request to its API (`POST /api/backups/{id}/copy`,
 * replicate.ts) run in one process. Their claims of a copy both named that process alone
 * (copyOwner: host, pid, start), and claimCopy took a claim that was "its own": so the API
 * sent a backup to a target while the copier was still sending it there, and cleared the
 * copier's half-written upload as a killed copy's debris. Now a claim names its attempt, and
 * the API answers `busy` while the copier holds the copy.
 *
 * SFTP, because an upload to it can be held in the middle while the daemon answers requests:
 * the sshd process serving the copier's connection is stopped (SIGSTOP), the daemon is not.
 */
forEachEngine('one daemon, one backup, one target: one upload at a time', (fixture) => {
  let sshd: TestSshd | undefined;
  before(function () {
    const problem = sshdProblem();
    if (!problem) return;
    if (process.env.CI === 'true') throw new Error(`sshd is required under CI=true: ${problem}`);
    console.warn(`    (skipping: ${problem})`);
    this.skip();
  });
  after(async () => {
    await sshd?.stop();
  });

  it('answers an API copy "busy" while the daemon\'s own copier is sending that backup to that target, and the backup is uploaded once', async function () {
    this.timeout(300_000);
    sshd = await startSshd();
    const work = mkdtempSync(path.join(tmpdir(), 'license-copy-one-daemon-'));
    const serves: ServeProcess[] = [];
    const frozen: number[] = [];
    try {
      const backups = path.join(work, 'backups');
      mkdirSync(backups, { mode: 0o700 });
      const keyFile = path.join(work, 'id_ed25519');
      writeFileSync(keyFile, sshd.privateKey, { mode: 0o600 });
      const target = { name: 'offsite', kind: 'sftp', host: sshd.host, port: sshd.port, user: sshd.user, path: sshd.directory, private_key_file: keyFile, host_key_fingerprint: sshd.hostKeyFingerprint, timeout: 600 };
      const env: Record<string, string> = {
        LICENSE_DATABASE_URL: await fixture.freshUrl(),
        LICENSE_DATA_DIR: path.join(work, 'data'),
        LICENSE_BACKUP_PATH: backups,
        LICENSE_BACKUP_ENCRYPTION_KEY: 'c5'.repeat(32),
        LICENSE_ADMIN_TOKEN: TOKEN,
        LICENSE_BACKUP_TARGETS: JSON.stringify([target]),
      };
      assert.equal((await runCli(['init'], { env, cwd: work })).code, 0);
      // Made before the daemon starts: its first round's catch-up notes it for the target.
      const record = plantBackup(backups, ARCHIVE_BYTES);

      // How long a whole copy takes here, through the target's own code, into a directory of its own.
      mkdirSync(path.join(sshd.localDirectory, 'measure'));
      const settings = (await resolveConfig({ cwd: work, env })).settings.backup.targets[0]!;
      const measured = await openTarget({ ...settings, path: path.posix.join(sshd.directory, 'measure') } as typeof settings, env);
      const whole = await timedCopy(measured, backups, record);
      const context = `a whole copy took ${Math.round(whole)} ms here`;

      // Every upload of the archive begins as a `.tmp-<ms>-<random>-<file>` of its own.
      const uploads = new Set<string>();
      let firstUpload: () => void = () => undefined;
      const uploading = new Promise<void>((resolve) => (firstUpload = resolve));
      let held = false;
      const watcher = watch(sshd.localDirectory, (_event, name) => {
        if (!name?.startsWith('.tmp-') || !name.endsWith(`-${record.file}`)) return;
        uploads.add(name);
        // Once, at the first event of the first upload (a write to it is an event too).
        if (held) return;
        held = true;
        // The copier's upload, held where it is: the sshd processes serving its connection stop.
        for (const pid of sshd!.connections()) {
          freezeConnection(pid);
          frozen.push(pid);
        }
        firstUpload();
      });
      try {
        const serve = await startServe(env);
        serves.push(serve);
        await withDeadline(uploading, 60_000 + 20 * whole, `the daemon did not begin its copy (${context})`);
        assert.ok(!readdirSync(sshd.localDirectory).includes(`${record.backup_id}.backup.json`), `the copy ended before it could be held (${context})`);

        const asked = await api(serve.url, 'POST', `/api/backups/${record.backup_id}/copy`, { token: TOKEN, body: { to: ['offsite'] } });
        assert.equal(asked.status, 200, asked.text);
        assert.deepEqual(
          asked.body.copies.map((copy: { target: string; result: string }) => [copy.target, copy.result]),
          [['offsite', 'busy']],
          `the API copied the backup while the daemon's copier was still sending it: ${asked.text}; uploads begun: ${[...uploads].join(', ')}`,
        );
        assert.equal(asked.body.failed, 0);

        // The copier's upload goes on, and is the only one.
        for (const pid of frozen.splice(0)) freezeConnection(pid, true);
        const started = performance.now();
        const bound = 60_000 + 10 * whole;
        while (!readdirSync(sshd.localDirectory).includes(`${record.backup_id}.backup.json`)) {
          assert.ok(performance.now() - started < bound, `the copier did not finish its copy within ${Math.round(bound)} ms (${context}); it logged:\n${serve.stderr()}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        assert.equal(createHash('sha256').update(readFileSync(path.join(sshd.localDirectory, record.file))).digest('hex'), record.sha256);
        assert.equal(uploads.size, 1, `uploads begun: ${[...uploads].join(', ')}`);
        // Asked again once it is there: verified there, not sent again.
        const again = await api(serve.url, 'POST', `/api/backups/${record.backup_id}/copy`, { token: TOKEN, body: { to: ['offsite'] } });
        assert.deepEqual(again.body.copies.map((copy: { result: string }) => copy.result), ['present'], again.text);
        assert.equal(uploads.size, 1);
        const logged = serve.stderr();
        assert.doesNotMatch(logged, /off-site copy failed/, logged);
        assert.deepEqual(readdirSync(sshd.localDirectory).filter((name) => name !== 'measure').sort(), [`${record.backup_id}.backup.json`, record.file].sort(), 'debris left on the target');
      } finally {
        watcher.close();
      }
    } finally {
      for (const pid of frozen) freezeConnection(pid, true);
      for (const serve of serves) await serve.stop('SIGKILL').catch(() => undefined);
      rmSync(work, { recursive: true, force: true });
    }
  });
});
