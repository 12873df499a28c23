import assert from 'node:assert/strict';
import type { OperationContext } from '../../../src/lib/context.js';
import { createCustomer, listCustomers } from '../../../src/lib/customers.js';
import { LicenseServerError, type ErrorCode } from '../../../src/lib/errors.js';
import { importCustomers } from '../../../src/lib/import/customers.js';
import { importLicenses } from '../../../src/lib/import/licenses.js';
import { IMPORT_MAX_BYTES, IMPORT_MAX_ROWS } from '../../../src/lib/import/table.js';
import { createEntitlement } from '../../../src/lib/licensing/entitlements.js';
import { listLicenses } from '../../../src/lib/licensing/licenses.js';
import { replaceNotificationSettings } from '../../../src/lib/notifications/settings.js';
import type { Database, Queryable } from '../../../src/lib/storage/types.js';
import { forEachEngine } from '../../support/engines.js';

const refused = (code: ErrorCode, message?: RegExp) => (error: unknown) => error instanceof LicenseServerError && error.code === code && (message === undefined || message.test(error.message));

forEachEngine('CSV import of customers and licenses (src/lib/import)', (fixture) => {
  let db: Database;
  const context: OperationContext = { actor: 'token:importer', clock: () => new Date('2027-03-01T12:00:00Z') };
  const count = async (table: string) => Number((await db.query(`SELECT count(*) AS n FROM ${table}`))[0]!.n);
  const counts = async () => ({ customers: await count('customers'), licenses: await count('licenses'), audit: await count('audit_log'), deliveries: await count('notification_deliveries') });
  let acme: string;

  before(async () => {
    db = await fixture.freshDatabase();
    // A rule for every event, so that each create's event leaves a delivery to count.
    await replaceNotificationSettings(db, { webhooks: [{ name: 'ops', url: 'http://127.0.0.1:9/hook', secret: 'import-secret-0123456789' }], rules: [{ event: '*', webhook: 'ops' }] }, context);
    acme = (await createCustomer(db, { name: 'Acme GmbH', email: 'billing@acme.example' }, context)).id;
    await createCustomer(db, { name: 'Twin' }, context);
    await createCustomer(db, { name: 'Twin' }, context);
    await createEntitlement(db, { code: 'seats', name: 'Seats' }, context);
    await createEntitlement(db, { code: 'reports.export', name: 'Reports' }, context);
  });

  it('customers: a dry run reports every row\'s errors by physical line and writes nothing; the corrected file imports every row, audited as creates', async () => {
    const bad = [
      'name,email,id,created_at',
      'Initech,billing@initech.example,ignored,ignored',
      '"Multi',
      'line",not-an-address,,',
      ',also-bad,,',
      'Too,many,fields,here,really',
      '',
      '"=cmd()",,,',
    ].join('\r\n');
    const before = await counts();
    const dry = await importCustomers(db, bad, { dryRun: true }, context);
    // Line 3's name spans lines 3 and 4 (and, holding a line break, is no name).
    assert.deepEqual(
      dry.errors.map((error) => [error.line, error.column, error.code]),
      [[3, 'name', 'INVALID_INPUT'], [3, 'email', 'INVALID_INPUT'], [5, 'name', 'INVALID_INPUT'], [5, 'email', 'INVALID_INPUT'], [6, null, 'CSV_MALFORMED']],
    );
    assert.equal(dry.rows, 5);
    assert.equal(dry.valid, false);
    assert.equal(dry.imported, 0);
    const real = await importCustomers(db, bad, {}, context);
    assert.equal(real.valid, false, 'a real import of a bad file reports the same');
    assert.equal(real.imported, 0);
    assert.deepEqual(await counts(), before, 'neither wrote anything');

    const good = ['name,email,id,created_at', 'Initech,billing@initech.example,ignored,ignored', '"Quoted, with a comma",,,', '', '"\'=cmd()",,,'].join('\r\n');
    assert.equal((await importCustomers(db, good, { dryRun: true }, context)).valid, true);
    assert.deepEqual(await counts(), before, 'a valid dry run writes nothing either');
    const done = await importCustomers(db, good, {}, context);
    assert.deepEqual({ valid: done.valid, imported: done.imported, lines: done.created.map((row) => row.line) }, { valid: true, imported: 3, lines: [2, 3, 5] });
    const customers = await listCustomers(db, { limit: 100 });
    const made = done.created.map(({ id }) => customers.find((customer) => customer.id === id)!);
    assert.deepEqual(made.map(({ name, email, active }) => ({ name, email, active })), [
      { name: 'Initech', email: 'billing@initech.example', active: true },
      { name: 'Quoted, with a comma', email: null, active: true },
      { name: '=cmd()', email: null, active: true },
    ]);
    const audit = await db.query("SELECT actor, entity_id FROM audit_log WHERE action = 'customer.created' AND actor = 'token:importer' ORDER BY id");
    assert.deepEqual(audit.slice(-3).map((row) => String(row.entity_id)), done.created.map((row) => row.id));
  });

  it('refuses a header it cannot read, naming the column, before any row', async () => {
    await assert.rejects(importCustomers(db, 'name,emial\r\nx,y\r\n', { dryRun: true }, context), refused('IMPORT_COLUMNS_INVALID', /unknown column "emial"/));
    await assert.rejects(importCustomers(db, 'name,Name\r\n', { dryRun: true }, context), refused('IMPORT_COLUMNS_INVALID', /named twice/));
    await assert.rejects(importCustomers(db, 'email\r\nx@y.example\r\n', { dryRun: true }, context), refused('IMPORT_COLUMNS_INVALID', /no column "name"/));
    await assert.rejects(importCustomers(db, '\r\n\r\n', { dryRun: true }, context), refused('IMPORT_COLUMNS_INVALID', /empty/));
    await assert.rejects(importLicenses(db, 'type,valid_until\r\n', { dryRun: true }, context), refused('IMPORT_COLUMNS_INVALID', /"customer_id" or "customer_email" or "customer_name"/));
    await assert.rejects(importCustomers(db, 'name\r\n"open\r\n', { dryRun: true }, context), refused('CSV_MALFORMED', /^line 2:/));
    await assert.rejects(importCustomers(db, Buffer.from([0x6e, 0x61, 0x6d, 0x65, 0x0d, 0x0a, 0xff, 0xfe]), { dryRun: true }, context), refused('CSV_MALFORMED', /UTF-8/));
    // Excel's "CSV UTF-8" starts with a byte order mark, and spreadsheets write headers in any case.
    assert.equal((await importCustomers(db, '\uFEFFNAME , Email\r\nBom Ltd,\r\n', { dryRun: true }, context)).valid, true);
  });

  it(`bounds an import at ${IMPORT_MAX_ROWS} rows and ${IMPORT_MAX_BYTES} bytes`, async () => {
    const rows = (n: number) => `name\r\n${'x\r\n'.repeat(n)}`;
    assert.equal((await importCustomers(db, rows(IMPORT_MAX_ROWS), { dryRun: true }, context)).rows, IMPORT_MAX_ROWS);
    await assert.rejects(importCustomers(db, rows(IMPORT_MAX_ROWS + 1), { dryRun: true }, context), refused('IMPORT_TOO_LARGE', new RegExp(`${IMPORT_MAX_ROWS + 1} rows`)));
    await assert.rejects(importCustomers(db, Buffer.alloc(IMPORT_MAX_BYTES + 1, 0x61), { dryRun: true }, context), refused('IMPORT_TOO_LARGE', /bytes/));
  });

  it('licenses: names the customer by id, email or name, reads both forms of entitlements, and reports every column\'s error', async () => {
    const header = 'customer_id,customer_email,customer_name,type,valid_from,valid_until,max_machines,floating,lease_hours,metadata,binding,entitlements,has_decryption_key,key,id';
    const file = [
      header,
      `${acme},,,time_based,,2028-01-31,,,,,,,,lic-key-ignored,ignored`,
      ',billing@acme.example,,hybrid,2027-01-01,2028-01-31,5,TRUE,2,"{""crm"":""ACME-7""}",machine-key,seats:25; reports.export,true,,',
      ',,Acme GmbH,usage_based,,2028-01-31,,,,,,"[{""code"":""seats"",""name"":""Seats"",""usage_limit"":10,""used"":3,""remaining"":7}]",,,',
      ',,Twin,time_based,,2028-01-31,,,,,,,,,',
      ',,Nobody,time_based,,2028-01-31,,,,,,,,,',
      `${acme},,Someone Else,time_based,,2028-01-31,,,,,,,,,`,
      ',,,time_based,,2028-01-31,,,,,,,,,',
      `${acme},,,weekly,,31/01/2028,0,maybe,0,{bad,usb,nosuch,yes,,`,
      `${acme},,,time_based,2029-01-01,2028-01-31,,true,,,,,,,`,
    ].join('\n');
    const before = await counts();
    const dry = await importLicenses(db, file, { dryRun: true }, context);
    const byPlace = (a: readonly unknown[], b: readonly unknown[]) => (a[0] as number) - (b[0] as number) || String(a[1]).localeCompare(String(b[1]));
    assert.deepEqual(dry.errors.map((error) => [error.line, error.column, error.code]).sort(byPlace), [
      [5, 'customer_name', 'INVALID_INPUT'],
      [6, 'customer_name', 'CUSTOMER_NOT_FOUND'],
      [7, 'customer_name', 'INVALID_INPUT'],
      [8, 'customer_id', 'INVALID_INPUT'],
      [9, 'type', 'INVALID_LICENSE_TYPE'],
      [9, 'valid_until', 'INVALID_DATE'],
      [9, 'max_machines', 'INVALID_INPUT'],
      [9, 'floating', 'INVALID_INPUT'],
      [9, 'lease_hours', 'INVALID_INPUT'],
      [9, 'metadata', 'INVALID_INPUT'],
      [9, 'binding', 'INVALID_INPUT'],
      [9, 'entitlements', 'ENTITLEMENT_NOT_FOUND'],
      [9, 'has_decryption_key', 'INVALID_INPUT'],
      [10, null, 'INVALID_VALIDITY'],
    ].sort(byPlace));
    assert.match(dry.errors.find((error) => error.line === 5)!.message, /2 customers have the name "Twin"/);
    assert.match(dry.errors.find((error) => error.line === 7)!.message, /is not the name of customer/);
    assert.deepEqual(await counts(), before);

    const fixed = file.split('\n').slice(0, 4).join('\n');
    const done = await importLicenses(db, fixed, {}, context);
    assert.equal(done.imported, 3, JSON.stringify(done.errors));
    const licenses = await listLicenses(db, { limit: 1000 });
    const [plain, full, usage] = done.created.map(({ id }) => licenses.find((license) => license.id === id)!);
    assert.deepEqual([plain!.customer_id, full!.customer_id, usage!.customer_id], [acme, acme, acme]);
    assert.equal(plain!.valid_until, '2028-02-01T00:00:00.000Z', 'a date runs through that day, as for a create');
    assert.equal(plain!.has_decryption_key, false);
    assert.deepEqual({ type: full!.type, from: full!.valid_from, max: full!.max_machines, floating: full!.floating, lease: full!.lease_hours, metadata: full!.metadata, binding: full!.binding, key: full!.has_decryption_key }, {
      type: 'hybrid', from: '2027-01-01T00:00:00.000Z', max: 5, floating: true, lease: 2, metadata: { crm: 'ACME-7' }, binding: 'machine-key', key: true,
    });
    assert.deepEqual(full!.entitlements.map((e) => [e.code, e.usage_limit]), [['reports.export', null], ['seats', 25]]);
    assert.deepEqual(usage!.entitlements.map((e) => [e.code, e.usage_limit, e.used]), [['seats', 10, 0]], 'the export\'s used and remaining are the server\'s to count');
    const after = await counts();
    assert.deepEqual({ licenses: after.licenses - before.licenses, audit: after.audit - before.audit, deliveries: after.deliveries - before.deliveries }, { licenses: 3, audit: 3, deliveries: 3 }, 'one audit entry and one event per license, as a create');
  });

  it('writes nothing when a row fails while being written: the transaction is the whole file', async () => {
    const before = await counts();
    let inserts = 0;
    // The third license's INSERT fails as a database would (a constraint, a full disk).
    const failing: Database = Object.create(db, {
      transaction: {
        value: <T>(work: (tx: Queryable) => Promise<T>) => db.transaction((tx) => work({
          query: (sql, params) => tx.query(sql, params),
          execute: (sql, params) => {
            if (sql.trimStart().startsWith('INSERT INTO licenses') && ++inserts === 3) throw new Error('disk I/O error');
            return tx.execute(sql, params);
          },
        })),
      },
    });
    const file = `customer_id,type,valid_until\n${`${acme},time_based,2028-01-31\n`.repeat(4)}`;
    await assert.rejects(importLicenses(failing, file, {}, context), /disk I\/O error/);
    assert.equal(inserts, 3);
    assert.deepEqual(await counts(), before);
  });
});
