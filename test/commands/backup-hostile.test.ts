import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { TAR_END, tarHeader } from '../../src/lib/backup/archive/tar-header.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { SCHEMA_VERSION } from '../../src/lib/storage/migrations.js';
import { CLI, ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

const MiB = 1024 * 1024;
/** What the reviewer's manifest inflated to. */
const INFLATED = 900 * MiB;
/** Far below INFLATED: a reader that held the manifest would pass it several times over. */
const PEAK_BOUND = 300 * MiB;

/**
 * A 1 MB archive whose manifest.json inflates to 900 MiB of spaces: its tar header, then the
 * same 1 MiB gzip member of spaces 900 times (concatenated members are one gzip stream), then
 * the end of the tar. Every byte is well-formed; only the size is hostile.
 */
function manifestBomb(): Buffer {
  const spaces = gzipSync(Buffer.alloc(MiB, 0x20), { level: 9 });
  return Buffer.concat([
    gzipSync(tarHeader({ name: 'manifest.json', size: INFLATED, mode: 0o600, mtime: new Date('2000-01-01T00:00:00Z') })),
    ...Array.from({ length: INFLATED / MiB }, () => spaces),
    gzipSync(TAR_END),
  ]);
}

/** Puts `archive` in the directory as a listed backup: an index with its true size and SHA-256. */
function listAsBackup(directory: string, id: string, archive: Buffer, engine: string): void {
  const file = `${id}.backup.tar.gz`;
  writeFileSync(path.join(directory, file), archive);
  const index = {
    backup_id: id, created_at: '2026-01-01T00:00:00.000Z', trigger: 'manual', engine, schema_version: SCHEMA_VERSION, encrypted: false,
    tool_version: '0.1.0', file, size: archive.length, sha256: createHash('sha256').update(archive).digest('hex'), verified_at: '2026-01-01T00:00:01.000Z',
  };
  writeFileSync(path.join(directory, `${id}.backup.json`), JSON.stringify(index));
}

/** The peak resident set (VmHWM) of a process, in bytes, from /proc. */
function peakResident(pid: number): number {
  const kib = /^VmHWM:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  assert.ok(kib, `no VmHWM for process ${pid}`);
  return Number(kib) * 1024;
}

/**
 * Runs the CLI as runCli does, with a preloaded module that writes the process's own VmHWM to
 * standard error as it exits: the peak of the whole run, which polling from outside could miss.
 */
function runCliMeasured(args: string[], env: Record<string, string>, work: string): Promise<CliResult & { peak: number }> {
  const hook = path.join(work, 'peak-hook.mjs');
  writeFileSync(hook, `import { readFileSync, writeSync } from 'node:fs';
process.on('exit', () => writeSync(2, '\\npeak-vmhwm-kib ' + /^VmHWM:\\s+(\\d+) kB$/m.exec(readFileSync('/proc/self/status', 'utf8'))[1] + '\\n'));
`);
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', hook, CLI, ...args], { cwd: work, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      const kib = /peak-vmhwm-kib (\d+)/.exec(stderr)?.[1];
      resolve({ code, stdout, stderr, peak: kib === undefined ? Number.POSITIVE_INFINITY : Number(kib) * 1024, json: () => JSON.parse(stdout) });
    });
  });
}

forEachEngine('hostile backups and backup directories', (fixture) => {
  let work: string;
  let backups: string;
  let url: string;
  let env: Record<string, string>;
  let serve: ServeProcess | undefined;
  const cli = (args: string[]) => runCli(args, { env, cwd: work });
  const bomb = manifestBomb();

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-hostile-backups-'));
    url = await fixture.freshUrl();
    await (await openDatabase(url)).close();
  });
  // Each test its own backup directory: what one plants is not another's to list.
  let directories = 0;
  beforeEach(async () => {
    directories += 1;
    backups = path.join(work, `backups-${directories}`);
    mkdirSync(backups, { mode: 0o700 });
    env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: backups, LICENSE_CLIENT_RATE_LIMIT: '0' };
    if (directories === 1) ok(await cli(['customer', 'create', '--name', 'Kept']));
  });
  afterEach(async () => {
    await serve?.stop();
    serve = undefined;
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('refuses a manifest that inflates to 900 MiB as BACKUP_CORRUPT in backup validate and restore, in bounded memory', async function () {
    this.timeout(120_000);
    assert.ok(bomb.length < 1.1 * MiB, `the archive is small (${bomb.length} bytes)`);
    const id = '20260101T000000000Z-b0b0b0';
    listAsBackup(backups, id, bomb, fixture.engine);
    const loose = path.join(work, 'bomb.backup.tar.gz');
    writeFileSync(loose, bomb);
    const customers = ok(await cli(['customer', 'list', '--json'])).json();
    for (const args of [['backup', 'validate', id], ['backup', 'validate', loose], ['backup', 'restore', id, '--yes'], ['backup', 'restore', loose, '--yes']]) {
      const run = await runCliMeasured(args, env, work);
      assert.equal(run.code, 13, `${args.join(' ')}: exit ${run.code}\n${run.stderr}`);
      assert.match(run.stderr, /manifest\.json has 943718400 bytes.*\(BACKUP_CORRUPT\)/, args.join(' '));
      assert.ok(run.peak < PEAK_BOUND, `${args.join(' ')}: peak resident ${Math.round(run.peak / MiB)} MiB`);
    }
    assert.deepEqual(ok(await cli(['customer', 'list', '--json'])).json(), customers, 'nothing was restored');
  });

  it('refuses the same archive through the daemon\'s validate and restore routes, in bounded memory', async function () {
    this.timeout(120_000);
    const id = '20260101T000000000Z-b1b1b1';
    listAsBackup(backups, id, bomb, fixture.engine);
    serve = await startServe(env);
    const token = serve.token ?? ok(await cli(['token', 'create', '--name', `hostile-${Date.now()}`, '--json'])).json().token;
    for (const [route, body] of [[`/api/backups/${id}/validate`, {}], [`/api/backups/${id}/restore`, { confirm: id }]] as const) {
      const answer = await api(serve.url, 'POST', route, { token, body });
      assert.equal(answer.status, 422, `${route}: ${answer.text}`);
      assert.equal(answer.body.error.code, 'BACKUP_CORRUPT');
      assert.match(answer.body.error.message, /manifest\.json has 943718400 bytes/);
      const peak = peakResident(serve.child.pid!);
      assert.ok(peak < PEAK_BOUND, `${route}: the daemon's peak resident ${Math.round(peak / MiB)} MiB`);
    }
    assert.equal((await api(serve.url, 'GET', '/api/customers', { token })).body[0].name, 'Kept', 'the daemon serves the data it had');
  });

  it('never lists, serves, validates or restores a symbolic link or FIFO in the backup directory, and warns about each', async function () {
    this.timeout(60_000);
    const secret = path.join(work, 'secret.txt');
    writeFileSync(secret, 'THE-DAEMON-CAN-READ-THIS\n');
    const size = readFileSync(secret).length;
    const index = (id: string, bytes = size) => JSON.stringify({
      backup_id: id, created_at: '2026-01-01T00:00:00.000Z', trigger: 'manual', engine: fixture.engine, schema_version: SCHEMA_VERSION, encrypted: false,
      tool_version: '0.1.0', file: `${id}.backup.tar.gz`, size: bytes, sha256: '0'.repeat(64), verified_at: '2026-01-01T00:00:01.000Z',
    });
    const real = ok(await cli(['backup', 'create', '--json'])).json();
    // An archive that is a link to a file the daemon can read, with an ordinary index.
    const linked = '20260102T000000000Z-11111a';
    symlinkSync(secret, path.join(backups, `${linked}.backup.tar.gz`));
    writeFileSync(path.join(backups, `${linked}.backup.json`), index(linked));
    // An index that is a link (to an index kept elsewhere) beside an ordinary archive.
    const linkedIndex = '20260102T000000000Z-22222b';
    writeFileSync(path.join(work, 'elsewhere.json'), index(linkedIndex));
    writeFileSync(path.join(backups, `${linkedIndex}.backup.tar.gz`), readFileSync(secret));
    symlinkSync(path.join(work, 'elsewhere.json'), path.join(backups, `${linkedIndex}.backup.json`));
    // A FIFO as an archive: reading it would wait forever for a writer.
    const fifo = '20260102T000000000Z-33333c';
    execFileSync('mkfifo', [path.join(backups, `${fifo}.backup.tar.gz`)]);
    writeFileSync(path.join(backups, `${fifo}.backup.json`), index(fifo, 0));
    const irregular = [`${linked}.backup.tar.gz`, `${linkedIndex}.backup.json`, `${fifo}.backup.tar.gz`];

    const listed = ok(await cli(['backup', 'list', '--json']));
    assert.deepEqual(listed.json().map((backup: { backup_id: string }) => backup.backup_id), [real.backup_id]);
    assert.match(listed.stderr, new RegExp(`warning: ${linked}\\.backup\\.tar\\.gz is a symbolic link, not a regular file: it is never listed, downloaded, validated or restored`));
    assert.match(listed.stderr, new RegExp(`warning: ${linkedIndex}\\.backup\\.json is a symbolic link, not a regular file`));
    assert.match(listed.stderr, new RegExp(`warning: ${fifo}\\.backup\\.tar\\.gz is a FIFO, not a regular file`));
    for (const id of [linked, linkedIndex, fifo]) {
      for (const args of [['backup', 'validate', id], ['backup', 'restore', id, '--yes']]) {
        const refused = await cli(args);
        assert.equal(refused.code, 4, `${args.join(' ')}: ${refused.stderr}`);
        assert.match(refused.stderr, /not a regular file.*\(BACKUP_NOT_FOUND\)/);
      }
    }

    serve = await startServe(env);
    const token = serve.token ?? ok(await cli(['token', 'create', '--name', `symlinks-${Date.now()}`, '--json'])).json().token;
    const answer = (await api(serve.url, 'GET', '/api/backups', { token })).body;
    assert.deepEqual(answer.backups.map((backup: { backup_id: string }) => backup.backup_id), [real.backup_id]);
    assert.deepEqual(answer.warnings.filter((warning: { kind: string }) => warning.kind === 'not-a-regular-file').map((warning: { name: string }) => warning.name), irregular.sort());
    for (const id of [linked, linkedIndex, fifo]) {
      // An admin token is refused too: nothing reads through a link.
      const download = await fetch(`${serve.url}/api/backups/${id}/download`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(10_000) });
      const text = await download.text();
      assert.equal(download.status, 404, `${id}: ${text}`);
      assert.equal(JSON.parse(text).error.code, 'BACKUP_NOT_FOUND');
      assert.ok(!text.includes('THE-DAEMON-CAN-READ-THIS'));
      const validated = await api(serve.url, 'POST', `/api/backups/${id}/validate`, { token, body: {} });
      assert.equal(validated.body.error.code, 'BACKUP_NOT_FOUND', validated.text);
    }
    // A create (which clears debris first) leaves them alone: they are not its to remove.
    assert.equal((await api(serve.url, 'POST', '/api/backups', { token })).status, 201);
    assert.equal(readFileSync(path.join(backups, `${linked}.backup.tar.gz`), 'utf8'), 'THE-DAEMON-CAN-READ-THIS\n');
  });
});
