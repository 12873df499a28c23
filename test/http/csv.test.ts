import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CSV_COLUMNS, type CsvList } from '../../src/http/csv-columns.js';
import { cellText, parseCsv } from '../../src/lib/csv.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';

type Row = Record<string, unknown>;

/** A CSV answer read back: its header and rows as column-to-text maps (the formula escape undone). */
function readCsv(text: string): { header: string[]; rows: Array<Record<string, string>> } {
  const [header, ...records] = parseCsv(text);
  assert.ok(header, 'a header row');
  return { header: header.fields, rows: records.map((record) => Object.fromEntries(header.fields.map((name, i) => [name, record.fields[i]!]))) };
}

/**
 * CSV export and import through a real daemon (docs/http-api.md, "CSV export and import"):
 * an export is the JSON API's rows for the same query, every page of them; an import writes
 * every row or none.
 */
forEachEngine('CSV export and import over HTTP', (fixture) => {
  let serve: ServeProcess;
  let databaseUrl: string;
  let admin: string;
  let reader: string;
  let acme: string;
  const call = (method: string, route: string, options: { body?: unknown; raw?: string | Buffer; headers?: Record<string, string>; token?: string } = {}) =>
    api(serve.url, method, route, { token: admin, ...options });
  const csvImport = (kind: string, text: string | Buffer, query = '', token = admin) =>
    call('POST', `/api/${kind}/import${query}`, { raw: text, headers: { 'content-type': 'text/csv; charset=utf-8' }, token });
  const count = async (route: string) => (await walk(route)).length;

  /** Every row of a JSON list, following Link to its end. */
  async function walk(route: string, token = admin): Promise<Row[]> {
    const rows: Row[] = [];
    for (let next: string | undefined = route; next !== undefined;) {
      const answer = await call('GET', next, { token });
      assert.equal(answer.status, 200, answer.text);
      const body = answer.body as Row[] | { backups: Row[] };
      rows.push(...(Array.isArray(body) ? body : body.backups));
      next = /^<([^>]+)>; rel="next"$/.exec(answer.headers.get('link') ?? '')?.[1];
    }
    return rows;
  }

  /** The CSV export of `route` is the JSON rows of the same query, cell for cell. */
  async function sameAsJson(list: CsvList, route: string, token = admin, by: 'query' | 'accept' = 'query'): Promise<number> {
    const exported = by === 'query'
      ? await call('GET', `${route}${route.includes('?') ? '&' : '?'}format=csv`, { token })
      : await call('GET', route, { token, headers: { accept: 'text/csv' } });
    assert.equal(exported.status, 200, exported.text);
    assert.equal(exported.headers.get('content-type'), 'text/csv; charset=utf-8; header=present');
    assert.match(exported.headers.get('content-disposition')!, new RegExp(`^attachment; filename="${list}-\\d{8}T\\d{6}Z\\.csv"$`));
    assert.ok(exported.text.endsWith('\r\n') && !exported.text.startsWith('\uFEFF'));
    const { header, rows } = readCsv(exported.text);
    const json = await walk(route, token);
    assert.deepEqual(header, CSV_COLUMNS[list].filter((column) => json.length === 0 || column in json[0]! || column === 'machines_in_use'));
    assert.equal(rows.length, json.length, `${route}: ${rows.length} CSV rows, ${json.length} JSON rows`);
    // A delivery's attempt columns move while the daemon retries it between the two reads.
    const moving = list === 'notification-deliveries' ? new Set(['attempts', 'last_attempt_at', 'last_status', 'last_error', 'next_attempt_at', 'status', 'delivered_at']) : new Set<string>();
    const steady = (record: Record<string, string>) => Object.fromEntries(Object.entries(record).filter(([column]) => !moving.has(column)));
    json.forEach((row, i) => {
      assert.deepEqual(steady(rows[i]!), steady(Object.fromEntries(header.map((column) => [column, cellText(row[column])]))), `${route}, row ${i + 1}`);
    });
    return rows.length;
  }

  before(async function () {
    this.timeout(180_000);
    databaseUrl = await fixture.freshUrl();
    const env = { LICENSE_DATABASE_URL: databaseUrl };
    const dir = mkdtempSync(path.join(tmpdir(), 'license-csv-'));
    try {
      // Deliveries to a dead receiver for the deliveries' list: of the backup and the machine
      // below, not of the 1,151 licenses (each one retried against it, for nothing).
      writeFileSync(path.join(dir, 'n.yaml'), 'webhooks:\n  - name: ops\n    url: http://127.0.0.1:9/hook\n    secret: a-secret-of-the-webhook\nrules:\n  - event: backup.succeeded\n    webhook: ops\n  - event: machine.activated\n    webhook: ops\n');
      ok(await runCli(['init'], { env }));
      ok(await runCli(['notifications', 'set', '--file', path.join(dir, 'n.yaml')], { env }));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
    serve = await startServe({ ...env, LICENSE_CLIENT_RATE_LIMIT: '0', LICENSE_BACKUP_ENCRYPTION_KEY: '5a'.repeat(32) });
    admin = serve.token!;
    reader = ok(await runCli(['token', 'create', '--name', 'reader', '--scope', 'read', '--json'], { env })).json().token;
    acme = (await call('POST', '/api/customers', { body: { name: 'Acme GmbH', email: 'billing@acme.example' } })).body.id;
    await call('POST', '/api/customers', { body: { name: '=HYPERLINK("http://evil.example","Click")' } });
    await call('POST', '/api/customers', { body: { name: 'Initech, "the" company' } });
    assert.equal((await call('POST', '/api/entitlements', { body: { code: 'seats', name: 'Seats' } })).status, 201);
    // 1,101 hybrid licenses (more than one page of the export's own 1,000-row step, and
    // twelve of the JSON API's default pages) among 50 time-based ones, made by the import.
    const rows = (type: string, n: number) => Array.from({ length: n }, (_, i) => `${acme},${type},2099-01-${String(1 + (i % 28)).padStart(2, '0')},seats:${i + 10},"{""n"":""${i}""}"`);
    const made = await csvImport('licenses', ['customer_id,type,valid_until,entitlements,metadata', ...rows('hybrid', 1101), ...rows('time_based', 50)].join('\r\n'));
    assert.equal(made.status, 201, made.text.slice(0, 500));
    assert.equal(made.body.imported, 1151);
    // A machine, a usage report and a backup, so that every list has a row.
    const [license] = (await call('GET', '/api/licenses?limit=1')).body as Row[];
    const validated = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: (license as { key: string }).key, hardware_id: 'DESK-1', version: '1.0' } });
    assert.equal(validated.body.valid, true, validated.text);
    const usage = await api(serve.url, 'POST', '/api/v1/usage', {
      body: { license_key: (license as { key: string }).key, hardware_id: 'DESK-1', entitlement_code: 'seats', quantity: 1, occurred_at: new Date().toISOString(), idempotency_key: 'u-1' },
    });
    assert.equal(usage.status, 201, usage.text);
    assert.equal((await call('POST', '/api/backups', { body: {} })).status, 201);
  });
  after(async () => {
    await serve?.stop();
  });

  it('exports a filtered list of more than one page: every row the JSON API gives for the same query, cell for cell', async function () {
    this.timeout(120_000);
    assert.equal(await sameAsJson('licenses', '/api/licenses?type=hybrid'), 1101);
    assert.equal(await sameAsJson('licenses', '/api/licenses?type=hybrid&limit=97'), 1101, 'a limit sets the step, not the size');
    assert.equal(await sameAsJson('licenses', '/api/licenses?type=time_based&active=true'), 50);
    // From where the request starts: the rows of the pages after a cursor.
    const first = await call('GET', '/api/licenses?type=hybrid&limit=1000');
    const rest = /cursor=([^&>]+)/.exec(first.headers.get('link')!)![1]!;
    assert.equal(await sameAsJson('licenses', `/api/licenses?type=hybrid&cursor=${rest}`), 101);
  });

  it('answers CSV on every list route, also for Accept: text/csv, and JSON for ?format=json whatever the Accept', async function () {
    this.timeout(60_000);
    const licenseId = String(((await call('GET', '/api/licenses?limit=1')).body as Row[])[0]!.id);
    const lists: Array<[CsvList, string]> = [
      ['customers', '/api/customers'],
      ['entitlements', '/api/entitlements'],
      ['license-usage', `/api/licenses/${licenseId}/usage`],
      ['machines', '/api/machines?holding_seat=true'],
      ['audit', '/api/audit?action=customer.created'],
      ['notification-deliveries', '/api/notifications/deliveries?status=pending&limit=1000'],
      ['backups', '/api/backups'],
    ];
    for (const [list, route] of lists) assert.ok(await sameAsJson(list, route) >= 1, route);
    assert.equal(await sameAsJson('customers', '/api/customers', admin, 'accept'), 3, 'Accept alone');
    const byHeader = await call('GET', '/api/customers', { headers: { accept: 'application/json;q=0.5, text/csv' } });
    assert.match(byHeader.headers.get('content-type')!, /^text\/csv/);
    assert.equal(readCsv(byHeader.text).rows.length, 3);
    const preferJson = await call('GET', '/api/customers?format=json', { headers: { accept: 'text/csv' } });
    assert.equal(preferJson.headers.get('content-type'), 'application/json; charset=utf-8');
    assert.equal(preferJson.body.length, 3);
    const plain = await call('GET', '/api/customers', { headers: { accept: '*/*' } });
    assert.equal(plain.headers.get('content-type'), 'application/json; charset=utf-8');
    const bad = await call('GET', '/api/customers?format=xlsx');
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.code, 'INVALID_INPUT');
    const filter = await call('GET', '/api/licenses?format=csv&type=weekly');
    assert.equal(filter.status, 400, 'a bad filter is refused as JSON, before any row');
    assert.equal(filter.headers.get('content-type'), 'application/json; charset=utf-8');
  });

  it('escapes formulas and quotes fields as RFC 4180 has them', async () => {
    const text = (await call('GET', '/api/customers?format=csv')).text;
    assert.ok(text.startsWith('id,name,active,email,created_at,updated_at\r\n'), text.slice(0, 100));
    assert.match(text, /,"'=HYPERLINK\(""http:\/\/evil\.example"",""Click""\)",true,,/);
    assert.match(text, /,"Initech, ""the"" company",true,,/);
    assert.equal(text.split('\r\n').length, 5, 'CRLF after each of the header and three rows');
  });

  it('gives a read token key prefixes only: no key column, and no key anywhere in the file', async function () {
    this.timeout(60_000);
    assert.equal(await sameAsJson('licenses', '/api/licenses?type=time_based', reader), 50);
    const keys = (await walk('/api/licenses?type=time_based&limit=1000')).map((row) => String(row.key));
    const answer = await call('GET', '/api/licenses?type=time_based&format=csv', { token: reader });
    const { header, rows } = readCsv(answer.text);
    assert.ok(!header.includes('key') && header.includes('key_prefix'));
    assert.equal(keys.length, 50);
    for (const key of keys) {
      assert.ok(!answer.text.includes(key) && !answer.text.includes(key.replace(/-/g, '')), 'a full key in a read token\'s export');
      assert.ok(rows.some((row) => key.startsWith(row.key_prefix!)));
    }
    const empty = await call('GET', `/api/licenses?customer_id=${'0'.repeat(8)}-0000-4000-8000-${'0'.repeat(12)}&format=csv`, { token: reader });
    assert.equal(empty.text, `${CSV_COLUMNS.licenses.filter((column) => column !== 'key').join(',')}\r\n`, 'an empty list: the header alone, without key');
  });

  it('imports: a dry run reports a bad row by its line and writes nothing; a real import of it is refused whole; the corrected file imports', async () => {
    const customersBefore = await count('/api/customers?limit=1000');
    const auditBefore = await count('/api/audit?action=customer.created&limit=1000');
    const bad = 'name,email\r\nGlobex,ops@globex.example\r\n"Hooli\r\nXYZ",not an address\r\nUmbrella,\r\n';
    const dry = await csvImport('customers', bad, '?dry_run=true');
    assert.equal(dry.status, 200, dry.text);
    assert.deepEqual(dry.body.errors.map((error: { line: number; column: string; code: string }) => [error.line, error.column, error.code]), [[3, 'name', 'INVALID_INPUT'], [3, 'email', 'INVALID_INPUT']]);
    assert.deepEqual({ rows: dry.body.rows, valid: dry.body.valid, imported: dry.body.imported }, { rows: 3, valid: false, imported: 0 });
    const refused = await csvImport('customers', bad);
    assert.equal(refused.status, 400);
    assert.equal(refused.body.error.code, 'IMPORT_INVALID');
    assert.match(refused.body.error.message, /^1 of 3 rows are not valid, so nothing was imported: line 3 \(name\): .*; line 3 \(email\): /);
    assert.equal(await count('/api/customers?limit=1000'), customersBefore);
    assert.equal(await count('/api/audit?action=customer.created&limit=1000'), auditBefore);

    const fixed = bad.replace('"Hooli\r\nXYZ",not an address', 'Hooli,');
    assert.equal((await csvImport('customers', fixed, '?dry_run=true')).body.valid, true);
    assert.equal(await count('/api/customers?limit=1000'), customersBefore, 'a valid dry run writes nothing either');
    const done = await csvImport('customers', fixed);
    assert.equal(done.status, 201, done.text);
    assert.deepEqual(done.body.created.map((row: { line: number }) => row.line), [2, 3, 4]);
    const audit = await walk('/api/audit?action=customer.created&limit=3');
    const { actor } = (await call('GET', '/api/whoami')).body;
    assert.deepEqual(audit.slice(0, 3).map((entry) => [entry.entity_id, entry.actor]).reverse(), done.body.created.map((row: { id: string }) => [row.id, actor]));
  });

  it('imports an export again: the columns of a license export are the import\'s, and each row becomes a new license', async function () {
    this.timeout(60_000);
    const exported = (await call('GET', '/api/licenses?type=time_based&format=csv')).text;
    const dry = await csvImport('licenses', exported, '?dry_run=true');
    assert.equal(dry.status, 200, dry.text.slice(0, 500));
    assert.deepEqual({ valid: dry.body.valid, rows: dry.body.rows, errors: dry.body.errors }, { valid: true, rows: 50, errors: [] });
    const customers = (await call('GET', '/api/customers?format=csv')).text;
    assert.equal((await csvImport('customers', customers, '?dry_run=true')).body.valid, true);
  });

  it('refuses an import that is not text/csv, too large, or from a token without licenses', async () => {
    const json = await call('POST', '/api/customers/import', { body: { name: 'x' } });
    assert.equal(json.status, 415);
    assert.equal(json.body.error.code, 'UNSUPPORTED_MEDIA_TYPE');
    const latin1 = await call('POST', '/api/customers/import', { raw: 'name\r\nx\r\n', headers: { 'content-type': 'text/csv; charset=iso-8859-1' } });
    assert.equal(latin1.status, 415);
    // Refused by its Content-Length before it is read (the core's own byte bound is tested in test/lib/import).
    const large = await rawRequest(serve.url, 'POST', '/api/customers/import', { headers: { authorization: `Bearer ${admin}`, 'content-type': 'text/csv', 'content-length': String(4 * 1024 * 1024 + 1) }, body: 'name\r\n' });
    assert.equal(large.status, 413);
    assert.equal(large.body.error.code, 'IMPORT_TOO_LARGE');
    const rows = await csvImport('customers', `name\r\n${'x\r\n'.repeat(2001)}`);
    assert.equal(rows.status, 413);
    assert.equal(rows.body.error.code, 'IMPORT_TOO_LARGE');
    const forbidden = await csvImport('customers', 'name\r\nx\r\n', '', reader);
    assert.equal(forbidden.status, 403);
    assert.equal(forbidden.body.error.code, 'TOKEN_SCOPE');
    const header = await csvImport('licenses', 'type,valid_until,customer\r\n');
    assert.equal(header.status, 400);
    assert.equal(header.body.error.code, 'IMPORT_COLUMNS_INVALID');
  });
});
