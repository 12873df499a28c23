import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { recordUsage } from '../../src/lib/licensing/usage.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { activationRequestFor } from '../support/activation-request.js';
import { ok, runCli } from '../support/cli.js';
import { strayTimes, strayTimesIn, unnamedRecords } from '../support/output-rule.js';
import { startReceiver } from '../support/receiver.js';
import { startSmtpServer, type SmtpTestServer } from '../support/smtp-server.js';

/**
 * The output rule of README.md ("Output for scripts"), checked over every command that
 * oclif.manifest.json lists, so that a new command cannot escape it:
 * - with --json, standard output is one JSON document; every record in it names itself `id`;
 * - without --json and off a terminal, a create command prints only what a script needs, alone
 *   on its line (the new id; for `token create` the token), and every other command its text,
 *   with no escape sequences;
 * - every timestamp in either is RFC 3339 in UTC to the millisecond, as toISOString() writes it.
 */
const root = new URL('../..', import.meta.url);
const manifest = JSON.parse(readFileSync(new URL('oclif.manifest.json', root), 'utf8')) as { commands: Record<string, { flags: Record<string, unknown> }> };

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

type Run = 'json' | 'piped';

interface Case {
  /** The arguments of one run; a command that changes or uses up its target gets one per run. */
  readonly argv: (run: Run) => string[];
  /**
   * Standard output off a terminal, without --json: `id` (the new record's id alone on a line),
   * `token` (the new admin token alone), or `text` (what a reader is shown).
   */
  readonly piped: 'id' | 'token' | 'text';
  /** The records in the --json document: each must carry `id` (signing keys: `key_id`). */
  readonly records?: (json: any) => unknown[];
  readonly idKey?: 'key_id';
  /** The command that lists what a create command made, to find its printed id in. */
  readonly listedBy?: string[];
  /** The two runs one after the other: run at once they would refuse each other. */
  readonly serial?: true;
}

describe('output for scripts: one rule over every command (README.md)', function () {
  let work: string;
  let env: Record<string, string>;
  let receiver: Awaited<ReturnType<typeof startReceiver>>;
  let smtp: SmtpTestServer;
  const cli = (args: readonly string[]) => runCli(args, { cwd: work, env });
  const json = async (...args: string[]) => ok(await cli([...args, '--json'])).json();
  const file = (name: string) => path.join(work, name);
  /** A fresh activation request of the machine HW-2 (which already holds a seat), written for one run. */
  const writeRequest = (run: string) => {
    const name = file(`request-${run}.txt`);
    writeFileSync(name, activationRequestFor(at.licenseKey, 'HW-2').text);
    return name;
  };
  /** A CSV file for one run of an import. */
  const csvFile = (name: string, text: string) => {
    writeFileSync(file(name), text);
    return file(name);
  };
  const at = {
    customer: '',
    spareCustomer: '',
    license: '',
    licenseKey: '',
    spareLicense: '',
    machine: '',
    backup: '',
    backupFile: '',
    retire: { json: '', piped: '' },
    activeKey: '',
    delivery: '',
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-output-rule-'));
    env = {
      LICENSE_DATA_DIR: file('data'),
      LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32),
      LICENSE_SIGNING_KEY_ENCRYPTION_KEY: 'cd'.repeat(32),
      // An off-site target, for backup copy and backup status (and every backup made here goes there).
      LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'nas', kind: 'file', path: file('nas') }]),
    };
    mkdirSync(file('nas'));
    receiver = await startReceiver();
    smtp = await startSmtpServer();
    env = { ...env, ...smtp.env() };
    ok(await cli(['init']));
    at.customer = (await json('customer', 'create', '--name', 'Initech')).id;
    at.spareCustomer = (await json('customer', 'create', '--name', 'Spare')).id;
    await json('entitlement', 'create', '--code', 'seats', '--name', 'Seats');
    const license = await json('license', 'create', '--customer', at.customer, '--type', 'hybrid', '--valid-until', '2099-12-31', '--max-machines', '3', '--entitlement', 'seats:50', '--metadata', 'crm_id=AC-1');
    at.license = license.id;
    at.licenseKey = license.key;
    at.spareLicense = (await json('license', 'create', '--customer', at.customer, '--type', 'time_based', '--valid-until', '2099-12-31')).id;
    // Two keys become verify-only, one for each run of `signing-key retire`; the file below is
    // signed by the third, which stays.
    const [first] = await json('signing-key', 'list');
    await json('signing-key', 'rotate');
    const [, second] = (await json('signing-key', 'list')).sort((a: { created_at: string }, b: { created_at: string }) => a.created_at.localeCompare(b.created_at));
    await json('signing-key', 'rotate');
    at.retire = { json: first.key_id, piped: second.key_id };
    at.activeKey = (await json('signing-key', 'show')).key_id;
    // Before the checkout, which then raises license.checked_out: a delivery in the outbox that
    // the backup below holds too, so that it is still there after `backup restore` runs.
    writeFileSync(file('notifications.yaml'), `webhooks:\n  - name: ops\n    url: ${receiver.url}\n    secret: a-secret-of-the-webhook\nrules:\n  - event: "*"\n    webhook: ops\n`);
    ok(await cli(['notifications', 'set', '--file', file('notifications.yaml')]));
    ok(await cli(['license', 'checkout', at.license, '--ttl-days', '30', '--hardware-id', 'HW-1', '--out', file('hw-1.lic')]));
    at.machine = (await json('machine', 'list'))[0].id;
    at.delivery = (await json('notifications', 'deliveries', '--event', 'license.checked_out'))[0].id;
    const db = await openDatabase(path.join(file('data'), 'license-server.db'));
    try {
      await recordUsage(db, { license_key: at.licenseKey, hardware_id: 'HW-1', entitlement_code: 'seats', quantity: 2, occurred_at: new Date().toISOString(), idempotency_key: 'report-1' }, {});
    } finally {
      await db.close();
    }
    for (const name of ['revoke-json', 'revoke-piped']) await json('token', 'create', '--name', name);
    writeFileSync(file('passphrase'), 'a passphrase of some length\n');
    for (const run of ['json', 'piped']) {
      const { privateKey } = generateKeyPairSync('ed25519');
      writeFileSync(file(`escrow-${run}.p8`), privateKey.export({ format: 'pem', type: 'pkcs8', cipher: 'aes-256-cbc', passphrase: 'a passphrase of some length' }));
    }
    const backup = await json('backup', 'create');
    at.backup = backup.id;
    at.backupFile = path.join(file('data'), 'backups', backup.file);
    mkdirSync(file('out-json'));
    mkdirSync(file('out-piped'));
  });
  after(async () => {
    await receiver?.close();
    await smtp?.close();
    rmSync(work, { recursive: true, force: true });
  });

  const one = (json: any) => [json];
  const each = (json: any) => json as unknown[];
  const cases: Record<string, Case | { skip: string }> = {
    'audit list': { argv: () => ['audit', 'list', '--limit', '1000'], piped: 'text', records: each },
    'backup copy': { argv: () => ['backup', 'copy', at.backup, '--to', 'nas'], piped: 'text', serial: true },
    'backup create': { argv: () => ['backup', 'create'], piped: 'text', records: one, serial: true },
    'backup decrypt': { argv: (run) => ['backup', 'decrypt', at.backupFile, '--out', file(`plain-${run}.tar.gz`)], piped: 'text' },
    'backup drill': { argv: () => ['backup', 'drill'], piped: 'text', serial: true },
    'backup list': { argv: () => ['backup', 'list'], piped: 'text', records: each },
    'backup prune': { argv: () => ['backup', 'prune', '--dry-run'], piped: 'text' },
    'backup restore': { argv: () => ['backup', 'restore', at.backup, '--yes'], piped: 'text', serial: true },
    'backup status': { argv: () => ['backup', 'status'], piped: 'text', records: each },
    'backup validate': { argv: () => ['backup', 'validate', at.backup], piped: 'text', records: one, serial: true },
    'config show': { argv: () => ['config', 'show'], piped: 'text' },
    'customer activate': { argv: () => ['customer', 'activate', at.spareCustomer], piped: 'text', records: one },
    'customer create': { argv: (run) => ['customer', 'create', '--name', `Created ${run}`], piped: 'id', records: one, listedBy: ['customer', 'list'] },
    'customer import': { argv: (run) => ['customer', 'import', csvFile(`customers-${run}.csv`, `name\r\nImported ${run}\r\n`)], piped: 'id', records: (json) => json.created, listedBy: ['customer', 'list'] },
    'customer deactivate': { argv: () => ['customer', 'deactivate', at.spareCustomer], piped: 'text', records: one },
    'customer list': { argv: () => ['customer', 'list'], piped: 'text', records: each },
    'customer show': { argv: () => ['customer', 'show', at.customer], piped: 'text', records: one },
    'customer update': { argv: (run) => ['customer', 'update', at.spareCustomer, '--email', `${run}@spare.example`], piped: 'text', records: one },
    'entitlement create': { argv: (run) => ['entitlement', 'create', '--code', `made.${run}`, '--name', 'Made'], piped: 'id', records: one, listedBy: ['entitlement', 'list'] },
    'entitlement list': { argv: () => ['entitlement', 'list'], piped: 'text', records: each },
    init: { argv: () => ['init'], piped: 'text' },
    'license activate': { argv: () => ['license', 'activate', at.spareLicense], piped: 'text', records: one },
    'license checkout': { argv: (run) => ['license', 'checkout', at.license, '--ttl-days', '30', '--hardware-id', 'HW-2', '--out', file(`out-${run}`)], piped: 'text' },
    // A variant, not a command of its own: the checkout of an activation request (for HW-2, whose seat it keeps).
    'license checkout --request': {
      argv: (run) => ['license', 'checkout', at.license, '--ttl-days', '30', '--request', writeRequest(run), '--out', file(`out-${run}`), '--force'],
      piped: 'text',
    },
    'license create': { argv: () => ['license', 'create', '--customer', at.customer, '--type', 'time_based', '--valid-until', '2099-06-30'], piped: 'id', records: one, listedBy: ['license', 'list'] },
    'license import': { argv: (run) => ['license', 'import', csvFile(`licenses-${run}.csv`, `customer_id,type,valid_until\r\n${at.customer},time_based,2099-06-30\r\n`)], piped: 'id', records: (json) => json.created, listedBy: ['license', 'list'] },
    'license deactivate': { argv: () => ['license', 'deactivate', at.spareLicense], piped: 'text', records: one },
    'license inspect': { argv: () => ['license', 'inspect', file('hw-1.lic')], piped: 'text' },
    'license list': { argv: () => ['license', 'list'], piped: 'text', records: each },
    'license renew': { argv: () => ['license', 'renew', at.license, '--by', '1d'], piped: 'text', records: (json) => [json.license] },
    'license show': { argv: () => ['license', 'show', at.license], piped: 'text', records: one },
    'license update': { argv: (run) => ['license', 'update', at.license, '--metadata', `run=${run}`], piped: 'text', records: (json) => [json.license] },
    'license usage': { argv: () => ['license', 'usage', at.license], piped: 'text', records: each },
    'license verify': { argv: () => ['license', 'verify', file('hw-1.lic'), '--hardware-id', 'HW-1'], piped: 'text' },
    'machine activate': { argv: () => ['machine', 'activate', at.machine], piped: 'text', records: (json) => [json.machine] },
    'machine deactivate': { argv: () => ['machine', 'deactivate', at.machine], piped: 'text', records: (json) => [json.machine] },
    'machine list': { argv: () => ['machine', 'list'], piped: 'text', records: each },
    'machine release': { argv: () => ['machine', 'release', at.machine, '--lost-file', '--reason', 'output rule'], piped: 'text', records: (json) => [json.machine] },
    'machine show': { argv: () => ['machine', 'show', at.machine], piped: 'text', records: one },
    'notifications deliveries': { argv: () => ['notifications', 'deliveries'], piped: 'text', records: each },
    'notifications delivery': { argv: () => ['notifications', 'delivery', at.delivery], piped: 'text', records: one },
    'notifications preview': { argv: () => ['notifications', 'preview', '--event', 'license.checked_out'], piped: 'text' },
    'notifications redeliver': { argv: () => ['notifications', 'redeliver', at.delivery], piped: 'text', records: one, serial: true },
    'notifications set': { argv: () => ['notifications', 'set', '--file', file('notifications.yaml')], piped: 'text' },
    'notifications show': { argv: () => ['notifications', 'show'], piped: 'text' },
    'notifications test': { argv: () => ['notifications', 'test', '--webhook', 'ops', '--email', 'ops@example.com'], piped: 'text' },
    serve: { skip: 'the daemon: it takes no --json (readme.test.ts), and its answers are checked by test/http/output-rule.test.ts' },
    'signing-key export': { argv: (run) => ['signing-key', 'export', at.activeKey, '--out', file(`export-${run}.p8`), '--passphrase-file', file('passphrase')], piped: 'text' },
    'signing-key import': { argv: (run) => ['signing-key', 'import', file(`escrow-${run}.p8`), '--passphrase-file', file('passphrase')], piped: 'text', records: one, idKey: 'key_id' },
    'signing-key list': { argv: () => ['signing-key', 'list'], piped: 'text', records: each, idKey: 'key_id' },
    'signing-key protect': { argv: () => ['signing-key', 'protect'], piped: 'text' },
    'signing-key retire': { argv: (run) => ['signing-key', 'retire', at.retire[run], '--force'], piped: 'text', records: one, idKey: 'key_id' },
    'signing-key rotate': { argv: () => ['signing-key', 'rotate'], piped: 'text', records: (json) => [json.previous, json.active], idKey: 'key_id', serial: true },
    'signing-key show': { argv: () => ['signing-key', 'show', '--all'], piped: 'text', records: each, idKey: 'key_id' },
    'signing-key unprotect': { argv: () => ['signing-key', 'unprotect'], piped: 'text' },
    'token create': { argv: (run) => ['token', 'create', '--name', `made-${run}`], piped: 'token', records: one },
    'token list': { argv: () => ['token', 'list', '--all'], piped: 'text', records: each },
    'token revoke': { argv: (run) => ['token', 'revoke', `revoke-${run}`], piped: 'text', records: one },
  };

  it('has a case for every command of the manifest, and for none it does not have', () => {
    assert.deepEqual(Object.keys(cases).filter((id) => !id.includes(' --')).sort(), Object.keys(manifest.commands).map((id) => id.replace(/:/g, ' ')).sort());
    const skipped = Object.entries(cases).filter(([, spec]) => 'skip' in spec).map(([id]) => id);
    assert.deepEqual(skipped, ['serve'], 'only the daemon is left out');
    assert.ok(!('json' in manifest.commands.serve!.flags));
    assert.match(readFileSync(new URL('README.md', root), 'utf8'), /^### Output for scripts$/m, 'the rule is written down');
  });

  for (const [id, spec] of Object.entries(cases)) {
    if ('skip' in spec) continue;
    it(`${id}: --json prints one document, its records named by id, its times in the one form; piped, ${spec.piped === 'text' ? 'text in the same form' : `the new ${spec.piped} alone`}`, async () => {
      // Two processes at once where they do not get in each other's way: half the wait.
      const runJson = () => cli([...spec.argv('json'), '--json']);
      const runPiped = () => cli(spec.argv('piped'));
      const [jsonRun, piped] = spec.serial ? [await runJson(), await runPiped()] : await Promise.all([runJson(), runPiped()]);
      ok(jsonRun);
      const document = jsonRun.json();
      assert.deepEqual(strayTimesIn(document), [], `${id} --json:\n${jsonRun.stdout}`);
      assert.deepEqual(unnamedRecords(spec.records?.(document) ?? [], spec.idKey), [], `${id} --json: records without ${spec.idKey ?? 'id'}`);

      ok(piped);
      assert.ok(!piped.stdout.includes('\u001b'), `${id}: no escape sequences off a terminal`);
      assert.deepEqual(strayTimes(piped.stdout), [], `${id}:\n${piped.stdout}`);
      if (spec.piped === 'token') assert.match(piped.stdout, /^lsat_[A-Za-z0-9_-]{43}\n$/);
      if (spec.piped === 'id') {
        const printed = piped.stdout.slice(0, -1);
        assert.match(printed, UUID, `${id} prints the new id alone on a line: ${JSON.stringify(piped.stdout)}`);
        assert.equal(piped.stdout, `${printed}\n`);
        const listed = (await json(...spec.listedBy!)).map((record: { id: string }) => record.id);
        assert.ok(listed.includes(printed), `${printed} is the id of the record ${id} made`);
      }
    });
  }
});
