import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { recordUsage } from '../../src/lib/licensing/usage.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { runCli, ok } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

/** The operator's side of the license lifecycle: machines, changes, renewals, usage, tokens. */
forEachEngine('license lifecycle from the command line', (fixture) => {
  let env: Record<string, string>;
  let cwd: string;
  const cli = (...args: string[]) => runCli(args, { env, cwd });
  let customerId: string;

  before(async () => {
    cwd = mkdtempSync(path.join(tmpdir(), 'license-server-lifecycle-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl() };
    ok(await cli('init'));
    customerId = ok(await cli('customer', 'create', '--name', 'Globex', '--json')).json().id;
    ok(await cli('entitlement', 'create', '--code', 'api.calls', '--name', 'API calls'));
  });
  after(() => rmSync(cwd, { recursive: true, force: true }));

  it('creates a license with a machine limit, counts checked-out machines, and lists, deactivates and activates them', async () => {
    const license = ok(await cli('license', 'create', '--customer', customerId, '--type', 'time_based', '--valid-until', '2099-12-31',
      '--max-machines', '1', '--metadata', 'crm_id=AC-1', '--json')).json();
    assert.equal(license.max_machines, 1);
    assert.deepEqual(license.metadata, { crm_id: 'AC-1' });
    const out = path.join(cwd, 'first.lic');
    ok(await cli('license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'USB-HOST-1', '--out', out));
    const unbound = await cli('license', 'checkout', license.id, '--ttl-days', '30', '--out', path.join(cwd, 'unbound.lic'));
    assert.equal(unbound.code, 6, unbound.stderr);
    assert.match(unbound.stderr, /HARDWARE_ID_REQUIRED/);
    const second = await cli('license', 'checkout', license.id, '--ttl-days', '30', '--hardware-id', 'USB-HOST-2', '--out', path.join(cwd, 'second.lic'));
    assert.equal(second.code, 6, second.stderr);
    assert.match(second.stderr, /MACHINE_LIMIT_EXCEEDED/);

    const machines = ok(await cli('machine', 'list', '--license', license.key, '--json')).json();
    assert.deepEqual(machines.map((m: any) => [m.hardware_id, m.active, m.holds_seat]), [['USB-HOST-1', true, true]]);
    const table = ok(await cli('machine', 'list', '--license', license.id)).stdout;
    assert.match(table, /^ID\s+LICENSE\s+HARDWARE ID/m);
    assert.ok(table.includes('USB-HOST-1'));
    assert.equal(ok(await cli('machine', 'show', machines[0].id, '--json')).json().hardware_id, 'USB-HOST-1');

    const deactivated = ok(await cli('machine', 'deactivate', machines[0].id));
    assert.match(deactivated.stderr, /^warning: its seat stays taken until \S+: an offline file checked out for it is valid until then \(if that file was lost, `license-server machine release \S+ --lost-file` frees the seat\)$/m);
    assert.equal(ok(await cli('machine', 'list', '--holding-seat', '--license', license.id, '--json')).json().length, 1, 'its file still holds the seat');
    const shown = ok(await cli('license', 'show', license.id)).stdout;
    assert.match(shown, /^machines in use:\s+1 of 1$/m);
    assert.match(shown, /^checkout:\s+\S+ by cli:\S+, for USB-HOST-1, valid until \S+$/m);
    ok(await cli('machine', 'activate', machines[0].id));
    const missing = await cli('machine', 'show', '3f1f2a9e-0000-4000-8000-000000000000');
    assert.equal(missing.code, 4);
    assert.match(missing.stderr, /MACHINE_NOT_FOUND/);
  });

  it('updates and renews a license, printing what changed and warning of machines over a lowered limit', async () => {
    const license = ok(await cli('license', 'create', '--customer', customerId, '--type', 'hybrid', '--valid-until', '2090-01-01',
      '--entitlement', 'api.calls:100', '--json')).json();
    for (const host of ['A', 'B']) {
      ok(await cli('license', 'checkout', license.id, '--ttl-days', '5', '--hardware-id', `HOST-${host}`, '--out', path.join(cwd, `${host}.lic`)));
    }
    const updated = ok(await cli('license', 'update', license.id, '--max-machines', '1', '--set-limit', 'api.calls:200', '--valid-until', '2091-01-01'));
    assert.match(updated.stderr, /^warning: 2 machines hold a seat, more than the new limit of 1; none is dropped/m);
    assert.match(updated.stdout, /^Changed valid_until, max_machines, entitlement api\.calls$/m);
    assert.match(updated.stdout, /^entitlements:\s+api\.calls \(used 0 of 200, 200 left\)$/m);
    assert.match(ok(await cli('license', 'update', license.id, '--max-machines', '1')).stdout, /^Nothing changed$/m);
    ok(await cli('license', 'update', license.id, '--max-machines', 'none'));

    for (const [args, code, pattern] of [
      [['--max-machines', '0'], 2, /INVALID_INPUT/],
      [['--max-machines', '-3'], 2, /INVALID_INPUT|USAGE/],
      [['--max-machines', '2.5'], 2, /INVALID_INPUT/],
      [['--remove-entitlement', 'no.such'], 4, /ENTITLEMENT_NOT_FOUND/],
      [['--set-limit', 'api.calls'], 2, /INVALID_INPUT/],
      [['--metadata', 'novalue'], 2, /INVALID_INPUT/],
    ] as const) {
      const result = await cli('license', 'update', license.id, ...args);
      assert.equal(result.code, code, `${args.join(' ')}: ${result.stderr}`);
      assert.match(result.stderr, pattern);
    }

    const renewed = ok(await cli('license', 'renew', license.id, '--by', '1y', '--json')).json();
    assert.equal(renewed.license.valid_until, new Date(Date.parse('2091-01-02T00:00:00.000Z') + 365 * 86_400_000).toISOString());
    assert.equal(renewed.license.key, license.key);
    const both = await cli('license', 'renew', license.id, '--by', '1y', '--until', '2099-01-01');
    assert.equal(both.code, 2);
    ok(await cli('license', 'deactivate', license.id));
    const inactive = await cli('license', 'renew', license.id, '--by', '30d');
    assert.equal(inactive.code, 6);
    assert.match(inactive.stderr, /LICENSE_INACTIVE/);
    const audit = ok(await cli('audit', 'list', '--action', 'license.updated', '--json')).json();
    assert.deepEqual(audit[audit.length - 1].details.changes.max_machines, { before: null, after: 1 });
  });

  it('lists usage newest first and shows a customer with its licenses summed', async () => {
    const license = ok(await cli('license', 'create', '--customer', customerId, '--type', 'usage_based', '--valid-until', '2090-01-01',
      '--entitlement', 'api.calls:50', '--json')).json();
    const db = await openDatabase(env.LICENSE_DATABASE_URL!, { create: false });
    try {
      for (const [key, quantity] of [['first', 5], ['second', 7]] as const) {
        await recordUsage(db, { license_key: license.key, hardware_id: 'H', entitlement_code: 'api.calls', quantity, occurred_at: new Date().toISOString(), idempotency_key: key }, {});
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    } finally {
      await db.close();
    }
    const records = ok(await cli('license', 'usage', license.id, '--json')).json();
    assert.deepEqual(records.map((r: any) => [r.idempotency_key, r.quantity, r.remaining]), [['second', 7, 38], ['first', 5, 45]]);
    assert.match(ok(await cli('license', 'usage', license.key)).stdout, /^RECORDED\s+OCCURRED\s+ENTITLEMENT/m);
    const summary = ok(await cli('customer', 'show', customerId, '--json')).json();
    assert.equal(summary.licenses, 3);
    assert.equal(summary.active_licenses, 2);
    assert.deepEqual(summary.entitlements, [{ code: 'api.calls', used: 12, usage_limit: 250 }]);
    assert.match(ok(await cli('customer', 'show', customerId)).stdout, /^entitlements:\s+api\.calls \(used 12 of 250\)$/m);
  });

  it('creates scoped, expiring tokens and lists their scopes', async () => {
    const token = ok(await cli('token', 'create', '--name', 'ci-backups', '--scope', 'backups', '--scope', 'read', '--expires-in', '90d', '--json')).json();
    assert.deepEqual(token.scopes, ['read', 'backups']);
    assert.ok(Math.abs(Date.parse(token.expires_at) - Date.now() - 90 * 86_400_000) < 60_000);
    const table = ok(await cli('token', 'list')).stdout;
    assert.match(table, /ci-backups\s+read backups\s+lsat_/);
  });
});
