import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli, ok } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';


forEachEngine('records from the command line', (fixture) => {
  let env: Record<string, string>;
  let cwd: string;
  const cli = (...args: string[]) => runCli(args, { env, cwd });

  before(async () => {
    cwd = mkdtempSync(path.join(tmpdir(), 'license-server-cli-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    ok(await cli('init'));
  });
  after(() => rmSync(cwd, { recursive: true, force: true }));

  it('creates and lists a customer, an entitlement and a license with a decryption key, each change audited', async () => {
    const customer = ok(await cli('customer', 'create', '--name', 'Acme & Co <"ü">', '--json')).json();
    assert.equal(customer.name, 'Acme & Co <"ü">');
    assert.match(customer.id, /^[0-9a-f-]{36}$/);

    const entitlement = ok(await cli('entitlement', 'create', '--code', 'seats', '--name', 'Seats', '--json')).json();
    assert.equal(entitlement.code, 'seats');

    const license = ok(
      await cli('license', 'create', '--customer', customer.id, '--type', 'hybrid', '--valid-until', '2099-12-31',
        '--entitlement', 'seats:25', '--with-decryption-key', '--json'),
    ).json();
    assert.match(license.key, /^([0-9A-Z]{4}-){6}[0-9A-Z]{4}$/);
    assert.equal(license.valid_until, '2100-01-01T00:00:00.000Z', 'a bare date means through the end of that day: the next day\'s 00:00:00, exclusive');
    assert.equal(license.has_decryption_key, true);
    assert.deepEqual(license.entitlements, [{ code: 'seats', name: 'Seats', usage_limit: 25, used: 0, remaining: 25 }]);

    assert.deepEqual(ok(await cli('customer', 'list', '--json')).json().map((c: { id: string }) => c.id), [customer.id]);
    assert.deepEqual(ok(await cli('entitlement', 'list', '--json')).json().map((e: { code: string }) => e.code), ['seats']);
    const listed = ok(await cli('license', 'list', '--json')).json();
    assert.deepEqual(listed, [license]);
    const table = ok(await cli('license', 'list')).stdout;
    assert.match(table, /^ID\s+KEY\s+CUSTOMER/m);
    assert.ok(table.includes(license.id) && table.includes(`${license.key_prefix}...`));

    const shown = ok(await cli('license', 'show', license.key, '--reveal-decryption-key', '--json')).json();
    assert.match(shown.decryption_key, /^[0-9a-f]{64}$/);

    ok(await cli('license', 'deactivate', license.id));
    ok(await cli('customer', 'deactivate', customer.id));

    const audit = ok(await cli('audit', 'list', '--json')).json();
    const user = execFileSync('id', ['-un'], { encoding: 'utf8' }).trim();
    assert.deepEqual(
      audit.map((e: { action: string }) => e.action),
      ['customer.deactivated', 'license.deactivated', 'license.created', 'entitlement.created', 'customer.created', 'signing_key.created'],
      'every change, down to the signing key that init generated',
    );
    assert.ok(audit.every((e: { actor: string }) => e.actor === `cli:${user}`));
    const licenseOnly = ok(await cli('audit', 'list', '--entity-type', 'license', '--json')).json();
    assert.deepEqual(licenseOnly.map((e: { action: string }) => e.action), ['license.deactivated', 'license.created']);
    const sinceTomorrow = ok(await cli('audit', 'list', '--since', new Date(Date.now() + 86_400_000).toISOString(), '--json')).json();
    assert.deepEqual(sinceTomorrow, []);
  });

  it('refuses bad input with a stable code, a non-zero exit and no change', async () => {
    const before = ok(await cli('audit', 'list', '--json')).json().length;
    const cases: Array<[string[], string, number]> = [
      [['customer', 'show', 'not-a-uuid'], 'INVALID_ID', 2],
      [['customer', 'show', '00000000-0000-4000-8000-000000000000'], 'CUSTOMER_NOT_FOUND', 4],
      [['entitlement', 'create', '--code', 'seats', '--name', 'Again'], 'ENTITLEMENT_CODE_EXISTS', 5],
      [['entitlement', 'create', '--code', 'bad code', '--name', 'Bad'], 'INVALID_ENTITLEMENT_CODE', 2],
      [['license', 'create', '--customer', '00000000-0000-4000-8000-000000000000', '--type', 'hybrid', '--valid-until', '2099-01-01'], 'CUSTOMER_NOT_FOUND', 4],
      [['license', 'create', '--customer', '00000000-0000-4000-8000-000000000000', '--type', 'hybrid', '--valid-until', '2020-01-01'], 'INVALID_VALIDITY', 2],
      [['license', 'create', '--customer', '00000000-0000-4000-8000-000000000000', '--type', 'hybrid', '--valid-until', '01/02/2099'], 'INVALID_DATE', 2],
      [['license', 'create', '--customer', '00000000-0000-4000-8000-000000000000', '--type', 'hybrid', '--valid-until', '2099-01-01', '--entitlement', 'seats:lots'], 'INVALID_INPUT', 2],
      [['license', 'show', 'nope'], 'INVALID_ID', 2],
      [['license', 'create', '--type', 'perpetual'], 'USAGE', 2],
      [['customer', 'create'], 'USAGE', 2],
      [['customer', 'list', '--limit', '0'], 'INVALID_INPUT', 2],
      [['token', 'revoke', 'nobody'], 'TOKEN_NOT_FOUND', 4],
    ];
    for (const [args, code, exit] of cases) {
      const json = await cli(...args, '--json');
      assert.equal(json.code, exit, `${args.join(' ')}: ${json.stdout}${json.stderr}`);
      assert.equal(json.json().error.code, code, args.join(' '));
      const human = await cli(...args);
      assert.equal(human.code, exit);
      assert.match(human.stderr, new RegExp(`^Error: .+ \\(${code}\\)\\nTry: .+`), args.join(' '));
      assert.equal(human.stdout, '');
      assert.ok(!/\n\s+at /.test(human.stderr), 'no stack trace');
    }
    assert.equal(ok(await cli('audit', 'list', '--json')).json().length, before);
  });

  it('issues admin tokens once, lists them without the secret, and revokes them', async () => {
    const created = ok(await cli('token', 'create', '--name', 'deploy', '--json')).json();
    assert.match(created.token, /^lsat_/);
    // Off a terminal, the token alone: token=$(license-server token create ...) works.
    const piped = ok(await cli('token', 'create', '--name', 'ci')).stdout;
    assert.match(piped, /^lsat_[A-Za-z0-9_-]{43}\n$/);
    const list = ok(await cli('token', 'list', '--json'));
    assert.ok(!list.stdout.includes(created.token), 'token list never shows a token');
    assert.deepEqual(list.json().map((t: { name: string }) => t.name), ['deploy', 'ci']);
    ok(await cli('token', 'revoke', 'deploy'));
    assert.deepEqual(ok(await cli('token', 'list', '--json')).json().map((t: { name: string }) => t.name), ['ci']);
    assert.equal(ok(await cli('token', 'list', '--all', '--json')).json().length, 2);
  });

  it('prints the signing key as PEM that OpenSSL accepts, and never the private key', async () => {
    const pem = ok(await cli('signing-key', 'show')).stdout;
    const file = path.join(cwd, 'key.pem');
    writeFileSync(file, pem);
    const text = execFileSync('openssl', ['pkey', '-pubin', '-in', file, '-noout', '-text'], { encoding: 'utf8' });
    assert.match(text, /ED25519 Public-Key/);
    const json = ok(await cli('signing-key', 'show', '--json')).json();
    assert.equal(json.public_key_pem, pem);
    assert.deepEqual(Object.keys(json).sort(), ['created_at', 'fingerprint', 'key_id', 'public_key_pem', 'state']);
    assert.equal(json.key_id, json.fingerprint.slice(0, 16));
    const db = await openDatabase(env.LICENSE_DATABASE_URL!);
    try {
      const [row] = await db.query<{ private_key: Buffer }>('SELECT private_key FROM signing_keys');
      const secret = Buffer.from(row!.private_key);
      for (const output of [pem, JSON.stringify(json), ok(await cli('audit', 'list', '--json')).stdout]) {
        for (const encoding of ['hex', 'base64', 'base64url'] as const) assert.ok(!output.includes(secret.toString(encoding)));
      }
    } finally {
      await db.close();
    }
  });

  it('ends with exactly one signing key when several processes start at the same moment on an empty database', async () => {
    const url = await fixture.freshUrl();
    const runs = await Promise.all(Array.from({ length: 4 }, () => runCli(['init', '--json'], { env: { LICENSE_DATABASE_URL: url }, cwd })));
    const fingerprints = runs.map((run) => ok(run).json().signing_key_fingerprint);
    assert.equal(new Set(fingerprints).size, 1, 'every process reported the same key');
    const db = await openDatabase(url);
    try {
      const rows = await db.query<{ n: number }>('SELECT count(*) AS n FROM signing_keys');
      assert.equal(Number(rows[0]!.n), 1);
    } finally {
      await db.close();
    }
  });
});

describe('data directory (SQLite)', () => {
  it('is created 0700 with the database file 0600 under ./data by default', async () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'license-server-cli-'));
    try {
      ok(await runCli(['init'], { cwd }));
      assert.equal(statSync(path.join(cwd, 'data')).mode & 0o777, 0o700);
      assert.equal(statSync(path.join(cwd, 'data', 'license-server.db')).mode & 0o777, 0o600);
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });

  it('reports an unusable database location as DATABASE_UNAVAILABLE', async () => {
    const cwd = mkdtempSync(path.join(tmpdir(), 'license-server-cli-'));
    try {
      writeFileSync(path.join(cwd, 'blocker'), 'a file where a directory should be');
      const result = await runCli(['init', '--database-url', path.join(cwd, 'blocker', 'x.db')], { cwd });
      assert.equal(result.code, 7);
      assert.match(result.stderr, /DATABASE_UNAVAILABLE/);
      const pg = await runCli(['customer', 'list', '--json'], { cwd, env: { LICENSE_DATABASE_URL: 'postgres://u:hunter2@127.0.0.1:1/none' } });
      assert.equal(pg.code, 7);
      assert.equal(pg.json().error.code, 'DATABASE_UNAVAILABLE');
      assert.ok(!pg.stdout.includes('hunter2'), 'the password is never shown');
    } finally {
      rmSync(cwd, { recursive: true, force: true });
    }
  });
});
