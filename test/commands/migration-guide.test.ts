import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LicenseClient } from '../../src/client/index.js';
import { verifyGraceToken } from '../../src/lib/licensing/grace-token.js';
import { verifyLicenseFile } from '../../src/lib/offline/verify.js';
import { TABLES } from '../../src/lib/storage/migrations.js';
import { CLI, ok, runCli, type CliResult } from '../support/cli.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../support/postgres.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * The README's "Moving from SQLite to PostgreSQL", followed step by step with real processes.
 * Every `license_server` command of the guide's shell blocks is run here as written, in the
 * guide's order, with the built CLI in place of the shell function (and the test's files in
 * place of the example paths); the steps around them (stopping and starting daemons, copying
 * the file, the load balancer) are done by the test where the guide says to.
 */
const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const HEADING = '## Moving from SQLite to PostgreSQL\n';

function guideSection(): string {
  const start = readme.indexOf(HEADING);
  assert.ok(start >= 0, `README has "${HEADING.trim()}"`);
  const end = readme.indexOf('\n## ', start + HEADING.length);
  return readme.slice(start, end === -1 ? undefined : end);
}

/** The `license_server ...` lines of the guide's sh blocks, in order, trailing comments dropped. */
function guideCommands(): string[] {
  const commands: string[] = [];
  for (const [, body] of guideSection().matchAll(/```sh\n([\s\S]*?)```/g)) {
    for (const line of body!.split('\n')) {
      const command = line.trim();
      if (command.startsWith('license_server ')) commands.push(command.replace(/\s+#.*$/, ''));
    }
  }
  return commands;
}

function cleanEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) env[name] = value;
  return { ...env, ...extra };
}

/** A free loopback port: the old daemon's, which the load balancer takes over. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** The load balancer: a round-robin TCP proxy, one upstream per connection. */
function roundRobin(port: number, upstreams: readonly string[]): Promise<{ server: Server; connections: number[]; close(): Promise<void> }> {
  const connections = upstreams.map(() => 0);
  const sockets = new Set<Socket>();
  let next = 0;
  const server = createServer((downstream) => {
    const index = next++ % upstreams.length;
    connections[index]! += 1;
    const { hostname, port: upstreamPort } = new URL(upstreams[index]!);
    const upstream = connect(Number(upstreamPort), hostname);
    for (const socket of [downstream, upstream]) {
      sockets.add(socket);
      socket.once('close', () => sockets.delete(socket));
      socket.on('error', () => {
        downstream.destroy();
        upstream.destroy();
      });
    }
    downstream.pipe(upstream).pipe(downstream);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () =>
      resolve({
        server,
        connections,
        close: () => {
          for (const socket of sockets) socket.destroy();
          return new Promise((done) => server.close(() => done()));
        },
      }),
    );
  });
}

/** POST /api/v1/validate on a connection of its own (no agent: a pooled socket would go to the same daemon). */
function validateOnNewConnection(port: number, body: object): Promise<any> {
  return new Promise((resolve, reject) => {
    const request = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/api/v1/validate', agent: false, headers: { 'content-type': 'application/json' } }, (response) => {
      let text = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve(JSON.parse(text)));
    });
    request.on('error', reject);
    request.end(JSON.stringify(body));
  });
}

describe('README: moving from SQLite to PostgreSQL, as the guide says', function () {
  this.timeout(120_000);

  let work: string;
  let postgresUrl: string | undefined;
  const serves: ServeProcess[] = [];
  let proxy: Awaited<ReturnType<typeof roundRobin>> | undefined;
  const clients: LicenseClient[] = [];

  before(async function () {
    await requirePostgres(this);
    work = mkdtempSync(path.join(tmpdir(), 'license-migration-'));
    postgresUrl = await createTestDatabase();
  });
  after(async () => {
    for (const client of clients) client.close();
    await proxy?.close();
    for (const serve of serves) await serve.stop().catch(() => undefined);
    if (postgresUrl) await dropTestDatabase(postgresUrl);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('moves a SQLite host with data to two daemons on PostgreSQL behind a load balancer, and back', async () => {
    const commands = guideCommands();
    const commandsRun: string[] = [];
    /** Runs the guide's next license_server command on a host, as sh runs it there. */
    const guide = async (expected: string, env: Record<string, string>, files: Record<string, string> = {}): Promise<CliResult> => {
      const command = commands[commandsRun.length];
      if (!command?.startsWith(`license_server ${expected}`)) assert.fail(`the guide's next command is "license_server ${expected} ...", not ${JSON.stringify(command)}`);
      commandsRun.push(command);
      // The example paths under /var/tmp become the test's files.
      const line = command.replace(/\/var\/tmp\/(\S+)/g, (whole, name: string) => {
        const pattern = Object.keys(files).find((example) => name.startsWith(example));
        assert.ok(pattern, `the test has a file for ${whole}`);
        return JSON.stringify(files[pattern]!);
      });
      return new Promise((resolve, reject) => {
        const child = spawn('sh', ['-c', `license_server() { node "$LICENSE_SERVER_CLI" "$@"; }\n${line}`], {
          cwd: work,
          env: cleanEnv({ ...env, LICENSE_SERVER_CLI: CLI }),
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        let stdout = '';
        let stderr = '';
        child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
        child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
        child.on('error', reject);
        child.on('close', (code) => resolve({ code, stdout, stderr, json: () => JSON.parse(stdout) }));
      });
    };

    // Prepare: the hosts' data directories and configuration, as the guide lays them out.
    const backupKey = randomBytes(32).toString('hex');
    const oldDir = path.join(work, 'old');
    const appDirs = [path.join(work, 'app1'), path.join(work, 'app2')];
    for (const dir of [oldDir, ...appDirs]) mkdirSync(dir, { mode: 0o700 });
    writeFileSync(path.join(oldDir, 'config.yaml'), 'issuer: licenses.example.com\n');
    for (const dir of appDirs) writeFileSync(path.join(dir, 'config.yaml'), `issuer: licenses.example.com\ndatabase:\n  url: ${postgresUrl}\n`, { mode: 0o600 });
    // The old host's env file, with LICENSE_CLIENT_RATE_LIMIT=0 on the new hosts (and on the
    // old one here too: every request of this test comes from 127.0.0.1).
    const oldEnv = { LICENSE_DATA_DIR: oldDir, LICENSE_HOST: '127.0.0.1', LICENSE_BACKUP_ENCRYPTION_KEY: backupKey, LICENSE_CLIENT_RATE_LIMIT: '0' };
    const appEnv = appDirs.map((dir) => ({ ...oldEnv, LICENSE_DATA_DIR: dir }));

    // The SQLite host, with data: customers, licenses with entitlements and limits, admin
    // tokens (one revoked), a hardware-bound .lic file, machines, usage.
    const oldPort = await freePort();
    const old = await startServe(oldEnv, ['--port', String(oldPort)]);
    serves.push(old);
    const admin = old.token!;
    const call = (base: string, method: string, route: string, body?: unknown, token = admin) => api(base, method, route, { token, body });
    for (const [code, name] of [['reports.export', 'Export reports'], ['seats', 'Seats']]) {
      assert.equal((await call(old.url, 'POST', '/api/entitlements', { code, name })).status, 201);
    }
    const acme = (await call(old.url, 'POST', '/api/customers', { name: 'Acme GmbH' })).body.id;
    const initech = (await call(old.url, 'POST', '/api/customers', { name: 'Initech' })).body.id;
    const desktop = (await call(old.url, 'POST', '/api/licenses', {
      customer_id: acme, type: 'hybrid', valid_until: '2099-12-31', with_decryption_key: true, max_machines: 2,
      entitlements: [{ code: 'reports.export' }, { code: 'seats', usage_limit: 25 }], metadata: { crm_id: 'AC-1042' },
    })).body;
    const metered = (await call(old.url, 'POST', '/api/licenses', {
      customer_id: initech, type: 'usage_based', valid_until: '2099-12-31', max_machines: 3, entitlements: [{ code: 'seats', usage_limit: 10 }],
    })).body;
    assert.ok(desktop.key && metered.key, JSON.stringify([desktop, metered]));
    const oldPem = (await call(old.url, 'GET', '/api/signing-key')).body.public_key_pem as string;
    const reader = ok(await runCli(['token', 'create', '--name', 'reports', '--scope', 'read'], { env: oldEnv })).stdout.match(/lsat_\S+/)![0];
    const retired = ok(await runCli(['token', 'create', '--name', 'retired'], { env: oldEnv })).stdout.match(/lsat_\S+/)![0];
    ok(await runCli(['token', 'revoke', 'retired'], { env: oldEnv }));
    ok(await runCli(['license', 'checkout', desktop.key, '--ttl-days', '30', '--hardware-id', 'LAPTOP-7', '--out', work], { env: oldEnv }));
    const [licFile] = readdirSync(work).filter((name) => name.endsWith('.lic'));
    assert.ok(licFile, 'the checkout wrote a .lic file');
    const oldValidation = await api(old.url, 'POST', '/api/v1/validate', { body: { license_key: metered.key, hardware_id: 'OLD-HOST', version: '2.1.0' } });
    assert.equal(oldValidation.body.valid, true, oldValidation.text);
    const beforeMove = { license_key: metered.key, hardware_id: 'OLD-HOST', entitlement_code: 'seats', quantity: 5, occurred_at: new Date().toISOString(), idempotency_key: 'before-move' };
    assert.equal((await api(old.url, 'POST', '/api/v1/usage', { body: beforeMove })).status, 201);

    // An application with the client library, online against the old daemon's address, which
    // the load balancer takes over: it is never told about the move.
    const clientDir = path.join(work, 'client');
    const app = new LicenseClient({
      serverAddr: `127.0.0.1:${oldPort}`, licenseKey: desktop.key, version: '2.1.0', hardwareId: 'LAPTOP-7', requestTimeout: 2000,
      offline: { enabled: true, cacheDir: clientDir, licenseFile: path.join(work, licFile), publicKey: oldPem, allowOfflineUsageReporting: true },
    });
    clients.push(app);
    const online = await app.validate();
    assert.deepEqual([online.valid, online.source], [true, 'online'], JSON.stringify(online));
    assert.deepEqual(await app.reportUsage('seats', 2), { accepted: true, queued: false, remaining: 23 });

    const snapshot = async (env: Record<string, string>) => ({
      licenses: ok(await runCli(['license', 'list', '--json'], { env })).json(),
      customers: ok(await runCli(['customer', 'list', '--json'], { env })).json(),
      machines: ok(await runCli(['machine', 'list', '--json'], { env })).json(),
      tokens: ok(await runCli(['token', 'list', '--all', '--json'], { env })).json(),
      usage: ok(await runCli(['license', 'usage', metered.id, '--json'], { env })).json(),
      audit: ok(await runCli(['audit', 'list', '--limit', '1000', '--json'], { env })).json() as Array<{ id: number; action: string }>,
    });
    const onSqlite = await snapshot(oldEnv);
    assert.equal(onSqlite.licenses.length, 2);
    assert.equal(onSqlite.machines.length, 2);

    // Cut over, on old: stop the daemon; the downtime starts. It is the sum of the guide's
    // steps up to app1 answering, without the checks this test makes in between.
    const stopped = await old.stop();
    assert.equal(stopped.code, 0);
    // Meanwhile the application answers from its .lic file and queues its usage.
    const duringDowntime = await app.validate();
    assert.deepEqual([duringDowntime.valid, duringDowntime.isOffline, duringDowntime.source], [true, true, 'license-file'], JSON.stringify(duringDowntime));
    assert.deepEqual(await app.reportUsage('seats', 1), { accepted: false, queued: true });

    const backupStarted = Date.now();
    const created = await guide('backup create', oldEnv);
    assert.equal(created.code, 0, created.stderr);
    const backupFile = /verified \((\S+\.backup\.tar\.gz\.enc)\)$/m.exec(created.stdout)?.[1];
    assert.ok(backupFile, created.stdout);
    // scp to app1:/var/tmp/
    const copied = path.join(appDirs[0]!, backupFile);
    copyFileSync(path.join(oldDir, 'backups', backupFile), copied);
    const backupMs = Date.now() - backupStarted;

    // On app1: restore into PostgreSQL.
    const restoreStarted = Date.now();
    const restored = await guide('backup restore', appEnv[0]!, { '20261123T231500123Z-3f9a1c': copied });
    assert.equal(restored.code, 0, restored.stderr);
    const restoreMs = Date.now() - restoreStarted;
    assert.match(restored.stdout, new RegExp(`^moved from SQLite to PostgreSQL: ${TABLES.length} tables, \\d+ rows; database\\.url is unchanged$`, 'm'));
    assert.match(restored.stdout, /^configuration restored; the replaced file is kept as .*config\.yaml\.replaced-/m);
    const onPostgres = await snapshot(appEnv[0]!);
    for (const kind of ['licenses', 'customers', 'machines', 'tokens', 'usage'] as const) {
      assert.deepEqual(onPostgres[kind], onSqlite[kind], `${kind} moved as they were`);
    }
    const movedAudit = onPostgres.audit.filter((entry) => onSqlite.audit.some((before) => before.id === entry.id));
    assert.deepEqual(movedAudit, onSqlite.audit, 'every audit entry moved, with its id');
    assert.equal(onPostgres.audit[0]!.action, 'backup.restored');

    // Start app1 and app2; the downtime ends when the first answers.
    const startStarted = Date.now();
    const app1 = await startServe(appEnv[0]!);
    serves.push(app1);
    assert.deepEqual((await api(app1.url, 'GET', '/readyz')).body, { status: 'ready' });
    const startMs = Date.now() - startStarted;
    const downtimeMs = stopped.ms + backupMs + restoreMs + startMs;
    const app2 = await startServe(appEnv[1]!);
    serves.push(app2);
    for (const serve of [app1, app2]) {
      assert.match(serve.stdout(), /\(database: postgres /);
      assert.equal(serve.fingerprint, old.fingerprint, 'the same signing key');
      assert.equal(serve.token, undefined, 'no bootstrap token: the admin tokens moved');
    }
    // The load balancer takes over the old daemon's address.
    proxy = await roundRobin(oldPort, [app1.url, app2.url]);
    if (process.env.LICENSE_MIGRATION_TIMINGS) console.log(`      downtime ${downtimeMs} ms: stop ${stopped.ms} ms, backup create and copy ${backupMs} ms, backup restore ${restoreMs} ms, start ${startMs} ms`);

    // Check: app1 kept its database.url (the restore wrote old's config.yaml over its own).
    const settings = new Map((ok(await guide('config show', appEnv[0]!)).stdout.match(/^\S+ +\S+ +.+$/gm) ?? []).map((row) => [row.split(/ +/)[0], row]));
    assert.match(settings.get('database.url') ?? '', new RegExp(`^database\\.url +${postgresUrl!.replace(/[.?*+^$()[\]{}|\\]/g, '\\$&')} +file `));
    assert.match(settings.get('issuer') ?? '', /^issuer +licenses\.example\.com +file /);
    const listed = ok(await guide('license list', appEnv[1]!)).stdout;
    for (const license of [desktop, metered]) assert.ok(listed.includes(license.key.slice(0, 8)), listed);
    const verified = ok(await guide('license verify', appEnv[1]!, { 'license-7KQ2-M9X-': path.join(work, licFile) }));
    assert.match(verified.stdout, /^valid: signature verified/m);
    assert.match(verified.stdout, /bound to "LAPTOP-7", which matches/);

    // The application, through the load balancer at its old address: online again, and the
    // report it queued during the downtime counted once.
    const back = await app.validate();
    assert.deepEqual([back.valid, back.isOffline, back.source], [true, false, 'online'], JSON.stringify(back));
    const offlineApp = new LicenseClient({
      licenseKey: desktop.key, version: '2.1.0', hardwareId: 'LAPTOP-7',
      offline: { enabled: true, cacheDir: path.join(work, 'offline-client'), licenseFile: path.join(work, licFile), publicKey: (await call(app2.url, 'GET', '/api/signing-key')).body.public_key_pem },
    });
    clients.push(offlineApp);
    const airGapped = await offlineApp.validate();
    assert.deepEqual([airGapped.valid, airGapped.source], [true, 'license-file'], JSON.stringify(airGapped));
    assert.deepEqual(airGapped.decryptionKey, back.decryptionKey, 'the old file unseals the key the new daemons hand out');
    const seatsOf = async (base: string, id: string) => (await call(base, 'GET', `/api/licenses/${id}`)).body.entitlements.find((e: { code: string }) => e.code === 'seats');
    assert.equal((await seatsOf(app2.url, desktop.id)).used, 3, '2 before the move, 1 queued during it');

    // Checkouts and validations through both daemons, signed with the old key.
    const now = new Date();
    for (const [index, serve] of [app1, app2].entries()) {
      const checkout = await call(serve.url, 'POST', `/api/licenses/${metered.id}/checkout`, { ttl_days: 7, hardware_id: `NEW-${index + 1}` });
      assert.equal(checkout.status, 200, checkout.text);
      assert.equal(verifyLicenseFile(checkout.body.license_file, { publicKey: [oldPem], now, hardwareId: `NEW-${index + 1}` }).payload.license_id, metered.id);
      const validation = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: metered.key, hardware_id: `NEW-${index + 1}`, version: '2.1.0' } });
      assert.equal(validation.body.valid, true, validation.text);
      assert.equal(verifyGraceToken(validation.body.grace_token, [oldPem], { now }).claims.license_id, metered.id);
    }
    // The seat OLD-HOST took on SQLite still counts: a fourth machine is refused, by either daemon.
    const fourth = await api(app2.url, 'POST', '/api/v1/validate', { body: { license_key: metered.key, hardware_id: 'NEW-3', version: '2.1.0' } });
    assert.match(fourth.text, /MACHINE_LIMIT_EXCEEDED/);
    assert.notEqual(fourth.body.valid, true);

    // Usage through one daemon is seen through the other, against the same limit; a report
    // made on SQLite is recognised by its idempotency key.
    const usage = (body: object) => ({ license_key: metered.key, hardware_id: 'NEW-1', entitlement_code: 'seats', occurred_at: new Date().toISOString(), ...body });
    const counted = await api(app1.url, 'POST', '/api/v1/usage', { body: usage({ quantity: 4, idempotency_key: 'after-move' }) });
    assert.deepEqual([counted.status, counted.body.used, counted.body.remaining], [201, 9, 1], counted.text);
    assert.equal((await seatsOf(app2.url, metered.id)).used, 9);
    const replayed = await api(app2.url, 'POST', '/api/v1/usage', { body: beforeMove });
    assert.deepEqual([replayed.status, replayed.body.replayed], [200, true], replayed.text);
    const over = await api(app2.url, 'POST', '/api/v1/usage', { body: usage({ quantity: 2, idempotency_key: 'over-limit' }) });
    assert.deepEqual([over.status, over.body.error?.code], [422, 'USAGE_LIMIT_EXCEEDED']);

    // The admin tokens from before, against both; the one revoked on SQLite stays revoked.
    for (const serve of [app1, app2]) {
      assert.equal((await call(serve.url, 'GET', '/api/customers', undefined, admin)).body.length, 2);
      assert.equal((await call(serve.url, 'GET', '/api/licenses', undefined, reader)).status, 200);
      assert.equal((await call(serve.url, 'POST', '/api/customers', { name: 'x' }, reader)).status, 403);
      assert.equal((await call(serve.url, 'GET', '/api/customers', undefined, retired)).status, 401);
    }

    // Validations through the load balancer reach both daemons: four new connections, two each.
    const before = [...proxy.connections];
    for (let i = 0; i < 4; i += 1) {
      const answer = await validateOnNewConnection(oldPort, { license_key: desktop.key, hardware_id: 'LAPTOP-7', version: '2.1.0' });
      assert.equal(answer.valid, true, JSON.stringify(answer));
    }
    assert.deepEqual(proxy.connections.map((n, i) => n - before[i]!), [2, 2]);

    // The first backup of the PostgreSQL database, with both daemons serving.
    const first = await guide('backup create', appEnv[0]!);
    assert.match(first.stdout, /^created backup \S+: .*, postgres, schema \d+, encrypted, verified/m);

    const machinesOnPostgres = (await call(app2.url, 'GET', '/api/machines', undefined, reader)).body;
    assert.deepEqual(machinesOnPostgres.map((m: { hardware_id: string }) => m.hardware_id).sort(), ['LAPTOP-7', 'NEW-1', 'NEW-2', 'OLD-HOST']);

    // Rollback: stop the new daemons, back up PostgreSQL, restore it into the old SQLite file.
    await proxy.close();
    proxy = undefined;
    for (const serve of [app1, app2]) assert.equal((await serve.stop()).code, 0);
    const last = await guide('backup create', appEnv[0]!);
    const lastFile = /verified \((\S+\.backup\.tar\.gz\.enc)\)$/m.exec(last.stdout)?.[1];
    assert.ok(lastFile, last.stdout + last.stderr);
    const carried = path.join(oldDir, 'from-postgres.backup.tar.gz.enc');
    copyFileSync(path.join(appDirs[0]!, 'backups', lastFile), carried);
    const rolledBack = await guide('backup restore', oldEnv, { '20261124T080000000Z-9b1e07': carried });
    assert.equal(rolledBack.code, 0, rolledBack.stderr);
    assert.match(rolledBack.stdout, new RegExp(`^moved from PostgreSQL to SQLite: ${TABLES.length} tables, \\d+ rows; database\\.url is unchanged$`, 'm'));
    assert.match(rolledBack.stdout, /the previous state is backup \S+/, 'old\'s own state is kept as a pre-restore backup');
    const again = await startServe(oldEnv);
    serves.push(again);
    assert.match(again.stdout(), /\(database: sqlite /);
    assert.equal((await seatsOf(again.url, metered.id)).used, 9, 'the usage counted on PostgreSQL came back');
    assert.deepEqual((await call(again.url, 'GET', '/api/machines', undefined, reader)).body, machinesOnPostgres);
    assert.equal((await again.stop()).code, 0);

    assert.deepEqual(commandsRun, commands, 'the test ran every license_server command of the guide');
  });
});
