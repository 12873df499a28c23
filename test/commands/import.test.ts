import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';

describe('customer import and license import (CSV)', function () {
  this.timeout(120_000);
  let work: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { cwd: work, env });
  const file = (name: string, text: string) => {
    const at = path.join(work, name);
    writeFileSync(at, text);
    return at;
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-import-'));
    env = { LICENSE_DATA_DIR: path.join(work, 'data') };
    ok(await cli('init'));
    ok(await cli('entitlement', 'create', '--code', 'seats', '--name', 'Seats'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('customer import --dry-run lists each bad row by line, writes nothing and exits 2; the corrected file imports, printing the new ids', async () => {
    const bad = file('bad.csv', 'name,email\r\nAcme GmbH,billing@acme.example\r\n"Initech\r\nInc",\r\nHooli,not-an-address\r\n');
    const dry = await cli('customer', 'import', bad, '--dry-run');
    assert.equal(dry.code, 2, dry.stderr);
    assert.match(dry.stdout, /^Dry run: nothing was written\.\nLINE +COLUMN +CODE +MESSAGE\n3 +name +INVALID_INPUT +customer name must not contain control characters\n5 +email +INVALID_INPUT +email must be one plain address/);
    assert.match(dry.stderr, /^Error: 2 of 3 rows are not valid; each error is listed above by line \(IMPORT_INVALID\)\nTry: /);
    const real = await cli('customer', 'import', bad, '--json');
    assert.equal(real.code, 2);
    const report = real.json<Record<string, unknown> & { errors: Array<{ line: number }> }>();
    assert.deepEqual({ ...report, errors: report.errors.map((error) => error.line) }, { kind: 'customers', dry_run: false, rows: 3, valid: false, imported: 0, errors: [3, 5], created: [] });
    assert.deepEqual(ok(await cli('customer', 'list', '--json')).json(), []);

    const good = file('good.csv', 'name,email\r\nAcme GmbH,billing@acme.example\r\n"Initech, Inc",\r\nHooli,\r\n');
    const checked = ok(await cli('customer', 'import', good, '--dry-run'));
    assert.match(checked.stdout, /^Dry run: all 3 rows are valid; nothing was written\./);
    const done = ok(await cli('customer', 'import', good));
    const ids = done.stdout.trim().split('\n');
    const listed = ok(await cli('customer', 'list', '--json')).json() as Array<{ id: string; name: string }>;
    // Off a terminal, the new ids alone, one a line, in the file's order (made in the same
    // millisecond, the list has them in id order).
    const byId = new Map(listed.map((customer) => [customer.id, customer.name]));
    assert.deepEqual(ids.map((id) => byId.get(id)), ['Acme GmbH', 'Initech, Inc', 'Hooli']);
    assert.equal(listed.length, 3);
    const audit = ok(await cli('audit', 'list', '--action', 'customer.created', '--json')).json() as Array<{ actor: string }>;
    assert.equal(audit.length, 3);
    assert.ok(audit.every((entry) => entry.actor.startsWith('cli:')));
  });

  it('license import names customers by email or name and reports the rest, all or none', async () => {
    const csv = file('licenses.csv', [
      'customer_email,customer_name,type,valid_until,entitlements',
      'billing@acme.example,,time_based,2099-12-31,seats:5',
      ',"Initech, Inc",hybrid,2099-12-31,',
      ',Nobody,time_based,2099-12-31,',
    ].join('\n'));
    const dry = await cli('license', 'import', csv, '--dry-run', '--json');
    assert.equal(dry.code, 2);
    assert.deepEqual(dry.json().errors.map((error: { line: number; column: string; code: string }) => [error.line, error.column, error.code]), [[4, 'customer_name', 'CUSTOMER_NOT_FOUND']]);
    assert.deepEqual(ok(await cli('license', 'list', '--json')).json(), []);
    writeFileSync(csv, [
      'customer_email,customer_name,type,valid_until,entitlements',
      'billing@acme.example,,time_based,2099-12-31,seats:5',
      ',"Initech, Inc",hybrid,2099-12-31,',
    ].join('\n'));
    const done = ok(await cli('license', 'import', csv, '--json')).json();
    assert.deepEqual({ imported: done.imported, lines: done.created.map((row: { line: number }) => row.line) }, { imported: 2, lines: [2, 3] });
    const licenses = ok(await cli('license', 'list', '--json')).json() as Array<{ customer_name: string; entitlements: Array<{ code: string; usage_limit: number }> }>;
    assert.deepEqual(licenses.map((license) => [license.customer_name, license.entitlements.map((e) => `${e.code}:${e.usage_limit}`)]).sort(), [['Acme GmbH', ['seats:5']], ['Initech, Inc', []]]);
  });

  it('refuses a file it cannot read, a header it does not know, and more than 2,000 rows, before any row', async () => {
    const missing = await cli('customer', 'import', path.join(work, 'nope.csv'));
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /cannot read the CSV file .*nope\.csv.*\(FILE_UNREADABLE\)/);
    const typo = await cli('customer', 'import', file('typo.csv', 'name,emial\r\nx,y\r\n'), '--json');
    assert.equal(typo.code, 2);
    assert.equal(typo.json().error.code, 'IMPORT_COLUMNS_INVALID');
    const large = await cli('customer', 'import', file('large.csv', `name\n${'x\n'.repeat(2001)}`));
    assert.equal(large.code, 2);
    assert.match(large.stderr, /\(IMPORT_TOO_LARGE\)/);
  });
});
