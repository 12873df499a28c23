import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { authenticateAdminToken, bootstrapAdminToken } from '../../src/lib/admin-tokens.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

/** Audit actors are `token:<name>`: no name may pass for another's. */
forEachEngine('look-alike token names and hardware IDs', (fixture) => {
  let work: string;
  let url: string;
  const cli = (...args: string[]) => runCli(args, { env: { LICENSE_DATABASE_URL: url }, cwd: work });
  const refused = (result: CliResult, exit: number, code: string) => {
    assert.equal(result.code, exit, `${result.stdout}${result.stderr}`);
    assert.match(result.stderr, new RegExp(`\\(${code}\\)`));
  };
  const withDatabase = async <T>(work: (db: Awaited<ReturnType<typeof openDatabase>>) => Promise<T>) => {
    const db = await openDatabase(url);
    try {
      return await work(db);
    } finally {
      await db.close();
    }
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-token-names-'));
    url = await fixture.freshUrl();
    ok(await cli('init'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('refuses a name that differs from a taken one only by case or NFKC, and names with invisible characters', async () => {
    ok(await cli('token', 'create', '--name', 'bootstrap', '--scope', 'read'));
    for (const name of ['BOOTSTRAP', 'Bootstrap', '\uff42ootstrap', ' bootstrap ']) refused(await cli('token', 'create', '--name', name), 5, 'TOKEN_NAME_EXISTS');
    for (const name of ['boot\u200bstrap', 'boot\ufeffstrap', 'ops\u202egnp.exe', 'ops\u2066x\u2069', 'tag\u{e0041}']) {
      const result = await cli('token', 'create', '--name', name);
      refused(result, 2, 'INVALID_INPUT');
      assert.match(result.stderr, /invisible characters/);
    }
    ok(await cli('token', 'revoke', 'bootstrap'));
    refused(await cli('token', 'create', '--name', 'BOOTSTRAP'), 5, 'TOKEN_NAME_EXISTS');
    // A name of a store's own: the first free bootstrap name, whatever its case.
    const bootstrapped = await withDatabase(async (db) => {
      assert.ok(await bootstrapAdminToken(db, { actor: 'test' }));
      return (await db.query('SELECT name FROM admin_tokens WHERE revoked_at IS NULL')).map((row) => row.name);
    });
    assert.deepEqual(bootstrapped, ['bootstrap-2']);
  });

  it('keeps tokens of an older store whose names clash by case working, warns about them, and revokes them only unambiguously', async () => {
    const first = ok(await cli('token', 'create', '--name', 'ops-one', '--json')).json();
    const second = ok(await cli('token', 'create', '--name', 'ops-two', '--json')).json();
    const third = ok(await cli('token', 'create', '--name', 'ops-three', '--json')).json();
    // As an older release let them be named.
    await withDatabase(async (db) => {
      await db.execute('UPDATE admin_tokens SET name = ? WHERE id = ?', ['Ops', first.id]);
      await db.execute('UPDATE admin_tokens SET name = ? WHERE id = ?', ['ops', second.id]);
      await db.execute('UPDATE admin_tokens SET name = ? WHERE id = ?', ['lin\u202exu', third.id]);
      for (const [issued, name] of [[first, 'Ops'], [second, 'ops'], [third, 'lin\u202exu']] as const) {
        assert.equal((await authenticateAdminToken(db, issued.token))?.actor, `token:${name}`, 'an old token keeps working under its exact name');
      }
    });
    const listed = ok(await cli('token', 'list'));
    assert.match(listed.stderr, new RegExp(`warning: tokens "Ops" \\(${first.id}\\), "ops" \\(${second.id}\\) have names that differ only by case`));
    assert.match(listed.stderr, new RegExp(`warning: token "lin\\\\u202exu" \\(${third.id}\\) has invisible characters in its name, shown escaped`));
    assert.ok(listed.stdout.includes('lin\\u202exu') && !listed.stdout.includes('\u202e'), listed.stdout);
    refused(await cli('token', 'create', '--name', 'OPS'), 5, 'TOKEN_NAME_EXISTS');
    const ambiguous = await cli('token', 'revoke', 'OPS');
    refused(ambiguous, 4, 'TOKEN_NOT_FOUND');
    assert.match(ambiguous.stderr, /2 live tokens have names that differ from "OPS" only by case/);
    assert.equal(ok(await cli('token', 'revoke', 'ops', '--json')).json().id, second.id, 'the exact name picks one');
    assert.equal(ok(await cli('token', 'revoke', 'OPS', '--json')).json().id, first.id, 'now only one live name is alike');
  });

  it('shows a hardware ID holding a bidi override escaped in machine list and show, license show and audit list', async () => {
    const customer = ok(await cli('customer', 'create', '--name', 'Initech', '--json')).json();
    const license = ok(await cli('license', 'create', '--customer', customer.id, '--type', 'time_based', '--valid-until', '2099-01-01', '--json')).json();
    const hardwareId = 'HW-\u202eexe.gnp';
    ok(await cli('license', 'checkout', license.id, '--ttl-days', '7', '--hardware-id', hardwareId, '--out', work));
    const machine = ok(await cli('machine', 'list', '--json')).json()[0];
    assert.equal(machine.hardware_id, hardwareId, '--json keeps the data as it is');
    for (const args of [['machine', 'list'], ['machine', 'show', machine.id], ['license', 'show', license.id], ['audit', 'list']]) {
      const shown = ok(await cli(...args)).stdout;
      assert.ok(shown.includes('HW-\\u202eexe.gnp'), `${args.join(' ')}:\n${shown}`);
      assert.ok(!shown.includes('\u202e'), `${args.join(' ')} prints the override itself`);
    }
  });
});
