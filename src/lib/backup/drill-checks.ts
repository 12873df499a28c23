import { LicenseServerError } from '../errors.js';
import type { OperationContext } from '../context.js';
import type { Queryable } from '../storage/types.js';
import type { ValidationCheck } from './validate.js';

/**
 * The tables a drill counts, each by the column that says when a row was made. Rows are
 * deleted (erasure, a deleted customer) but never made with an earlier time, so a store
 * restored to moment T holds at least the live store's rows made at or before T: fewer means
 * writes that never reached the backup or the replica.
 */
const COUNTED: ReadonlyArray<readonly [table: string, madeAt: string]> = [
  ['customers', 'created_at'],
  ['licenses', 'created_at'],
  ['machines', 'first_seen'],
  ['admin_tokens', 'created_at'],
  ['signing_keys', 'created_at'],
  ['audit_log', 'occurred_at'],
];

export interface RestoredStoreCheckOptions {
  /** The restored database: a scratch SQLite file, which the checkout check writes to. */
  readonly file: string;
  /** The store that serves. Only read. */
  readonly live: Queryable;
  /** Every live row made at or before this moment must be in the restored store. */
  readonly completeThrough: Date;
  readonly keyEncryptionKey?: Uint8Array;
  /** The issuer written into the drill's `.lic`. */
  readonly issuer: string;
  readonly context: OperationContext;
}

/**
 * What a drill checks of a restored store beside the live one, after integrity_check: the
 * row counts, the signing keys, and a `.lic` signed now by the restored active key that
 * verifies against the restored keys and the live ones. Throws RESTORE_DRILL_FAILED at the
 * first check that fails.
 */
export async function checkRestoredStore(options: RestoredStoreCheckOptions): Promise<ValidationCheck[]> {
  const { openDatabase } = await import('../storage/open.js');
  const restored = await openDatabase(options.file, { create: false, keyEncryptionKey: options.keyEncryptionKey });
  try {
    return [await checkRowCounts(restored, options), await checkSigningKeys(restored, options), await checkCheckout(restored, options)];
  } finally {
    await restored.close();
  }
}

async function checkRowCounts(restored: Queryable, options: RestoredStoreCheckOptions): Promise<ValidationCheck> {
  const through = options.completeThrough.toISOString();
  const counts: string[] = [];
  const missing: string[] = [];
  for (const [table, madeAt] of COUNTED) {
    const sql = `SELECT count(*) AS n FROM ${table} WHERE ${madeAt} <= ?`;
    const [live, there] = await Promise.all([count(options.live, sql, through), count(restored, sql, through)]);
    counts.push(`${table} ${there}`);
    if (there < live) missing.push(`${table}: ${live - there} of the live store's ${live}`);
  }
  if (missing.length > 0) {
    throw drillFailed(`rows made at or before ${through} are missing from the restored store (${missing.join('; ')}): writes that never reached it`);
  }
  return { check: 'rows', detail: `every live row made at or before ${through} is there (${counts.join(', ')})` };
}

async function checkSigningKeys(restored: Queryable, options: RestoredStoreCheckOptions): Promise<ValidationCheck> {
  const sql = 'SELECT key_id, public_key FROM signing_keys WHERE created_at <= ?';
  const through = options.completeThrough.toISOString();
  const [live, there] = await Promise.all([options.live.query(sql, [through]), restored.query(sql, [through])]);
  const restoredKeys = new Map(there.map((row) => [String(row.key_id), hex(row.public_key)]));
  for (const row of live) {
    const keyId = String(row.key_id);
    const publicKey = restoredKeys.get(keyId);
    if (publicKey === undefined) throw drillFailed(`signing key ${keyId} is missing from the restored store: files it signed would not verify there`);
    if (publicKey !== hex(row.public_key)) throw drillFailed(`signing key ${keyId} has another public key in the restored store`);
  }
  return { check: 'signing keys', detail: `the ${live.length} live signing key${live.length === 1 ? '' : 's'} made by then ${live.length === 1 ? 'is' : 'are'} there, with the same public key${live.length === 1 ? '' : 's'}` };
}

/**
 * A customer, a license and a bound checkout made in the restored scratch store, as a support
 * person would after a restore: the writes work, and the file its active key signs verifies
 * against its own keys and against the live server's (the keys its clients hold).
 */
async function checkCheckout(restored: import('../storage/types.js').Database, options: RestoredStoreCheckOptions): Promise<ValidationCheck> {
  const [{ createCustomer }, { createLicense }, { checkoutLicense }, { loadKeySet }, { verifyLicenseFile }] = await Promise.all([
    import('../customers.js'),
    import('../licensing/licenses.js'),
    import('../offline/checkout.js'),
    import('../signing-keys/keys.js'),
    import('../offline/verify.js'),
  ]);
  const context = { ...options.context, actor: 'restore-drill' };
  const clock = () => (context.clock ? context.clock() : new Date());
  const now = clock();
  let file: string;
  let keyId: string | undefined;
  try {
    // A scratch copy: its alert rules would raise deliveries that this process's listeners
    // (the command line's, the daemon's deliverer) look for in the live store.
    await restored.execute('UPDATE notification_alert_rules SET enabled = ?', [false]);
    const customer = await createCustomer(restored, { name: 'restore drill' }, context);
    // Valid from an hour back: a file starts at its license's valid_from, to the second, and
    // one made now could start after the moment it is verified at (CI: "license not yet valid").
    const license = await createLicense(restored, { customerId: customer.id, type: 'time_based', validFrom: new Date(now.getTime() - 3_600_000), validUntil: new Date(now.getTime() + 2 * 86_400_000) }, context);
    file = (await checkoutLicense(restored, license.id, { ttlDays: 1, hardwareId: 'restore-drill' }, { ...context, issuer: options.issuer })).license_file;
  } catch (error) {
    throw drillFailed(`a checkout in the restored store failed: ${error instanceof Error ? error.message : String(error)}`);
  }
  for (const [whose, keys] of [['restored', await loadKeySet(restored)], ['live', await loadKeySet(options.live)]] as const) {
    try {
      keyId = verifyLicenseFile(file, { publicKey: keys, hardwareId: 'restore-drill', now: clock() }).payload.key_id ?? keyId;
    } catch (error) {
      throw drillFailed(`a .lic signed in the restored store does not verify against the ${whose} keys: ${error instanceof Error ? error.message : String(error)}`);
    }
  }
  return { check: 'checkout', detail: `a .lic signed now${keyId ? ` by key ${keyId}` : ''} in the restored store verifies against the restored and the live keys` };
}

async function count(db: Queryable, sql: string, through: string): Promise<number> {
  const rows = await db.query<{ n: unknown }>(sql, [through]);
  return Number(rows[0]?.n ?? 0);
}

function hex(value: unknown): string {
  return value instanceof Uint8Array ? Buffer.from(value).toString('hex') : String(value);
}

export function drillFailed(message: string): LicenseServerError {
  return new LicenseServerError('RESTORE_DRILL_FAILED', message);
}
