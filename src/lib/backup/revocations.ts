import { licenseKeyPrefix } from '../licensing/license-key.js';
import { MACHINE_COLUMNS } from '../licensing/machines.js';
import type { Queryable, Row, SqlValue } from '../storage/types.js';
import { asBool, asIso } from '../storage/values.js';

/**
 * A restore puts back the data of the backup, but must never put back a credential that was
 * revoked after the backup was made (docs/backup-format.md, "What a restore keeps"). What the
 * database being replaced has revoked is read just before the swap and re-applied to the
 * restored data inside the swap (the same PostgreSQL transaction; the SQLite snapshot before
 * it is renamed into place), so no moment exists at which a revoked token works again:
 *
 * - admin tokens revoked there are revoked again, with their original revoked_at, always;
 * - licenses and customers deactivated there but active in the backup stay deactivated,
 *   unless the operator asks for the backup's state (`keep` false);
 * - machines deactivated there stay deactivated on the same terms, also one first seen after
 *   the backup (its row is copied in, deactivated, when its license is in the backup), so a
 *   restore never lets a machine an operator shut out take a seat again;
 * - activation request nonces answered there are recorded again, always, so that a request
 *   answered after the backup cannot be altered to name another machine and answered again
 *   (offline/request-checkout.ts). Nothing is reported of them: they are bookkeeping.
 */
export class RevocationCarry {
  private revoked: Revoked = { adminTokens: [], licenses: [], customers: [], machines: [], activationRequests: [] };
  private carried: CarriedRevocations;

  constructor(private readonly keep: boolean) {
    this.carried = { keep, admin_tokens: [], licenses: [], customers: [], machines: [] };
  }

  /** Reads the database about to be replaced (its tables must exist; `machines` and `activationRequests` only when it has those tables). */
  async read(current: Queryable, options: CarryTables): Promise<void> {
    this.revoked = {
      adminTokens: (await current.query('SELECT id, token_hash, revoked_at FROM admin_tokens WHERE revoked_at IS NOT NULL ORDER BY revoked_at, id')).map((row) => ({
        id: String(row.id),
        tokenHash: String(row.token_hash),
        revokedAt: asIso(row.revoked_at),
      })),
      licenses: (await current.query('SELECT id, updated_at FROM licenses WHERE active = ? ORDER BY id', [false])).map(deactivated),
      customers: (await current.query('SELECT id, updated_at FROM customers WHERE active = ? ORDER BY id', [false])).map(deactivated),
      machines: options.machines ? await current.query(`SELECT ${machineColumns(options).join(', ')} FROM machines WHERE active = ? ORDER BY id`, [false]) : [],
      activationRequests: options.activationRequests
        ? await current.query(`SELECT ${nonceColumns(options).join(', ')} FROM activation_requests ORDER BY nonce`)
        : [],
    };
  }

  /** Re-applies them to the restored data, before it becomes the live database. */
  async apply(restored: Queryable, options: CarryTables): Promise<void> {
    const carried: CarriedRevocations = { keep: this.keep, admin_tokens: [], licenses: [], customers: [], machines: [] };
    if (this.revoked.adminTokens.length > 0) {
      const live = await restored.query('SELECT id, name, token_hash, token_prefix FROM admin_tokens WHERE revoked_at IS NULL');
      for (const token of this.revoked.adminTokens) {
        // The same secret has the same hash: match on it too, not only on the row's id.
        const row = live.find((candidate) => String(candidate.id) === token.id || String(candidate.token_hash) === token.tokenHash);
        if (!row) continue;
        await restored.execute('UPDATE admin_tokens SET revoked_at = ? WHERE id = ?', [token.revokedAt, String(row.id)]);
        carried.admin_tokens.push({ id: String(row.id), name: String(row.name), prefix: String(row.token_prefix), revoked_at: token.revokedAt });
      }
    }
    if (this.revoked.licenses.length > 0) {
      const active = new Map((await restored.query('SELECT id, license_key FROM licenses WHERE active = ?', [true])).map((row) => [String(row.id), row]));
      for (const license of this.revoked.licenses) {
        const row = active.get(license.id);
        if (!row) continue;
        if (this.keep) await restored.execute('UPDATE licenses SET active = ?, updated_at = ? WHERE id = ?', [false, license.updatedAt, license.id]);
        carried.licenses.push({ id: license.id, key_prefix: licenseKeyPrefix(String(row.license_key)) });
      }
    }
    if (this.revoked.customers.length > 0) {
      const active = new Map((await restored.query('SELECT id, name FROM customers WHERE active = ?', [true])).map((row) => [String(row.id), row]));
      for (const customer of this.revoked.customers) {
        const row = active.get(customer.id);
        if (!row) continue;
        if (this.keep) await restored.execute('UPDATE customers SET active = ?, updated_at = ? WHERE id = ?', [false, customer.updatedAt, customer.id]);
        carried.customers.push({ id: customer.id, name: String(row.name) });
      }
    }
    // A backup from before machines existed gets its table by migration after the swap; what
    // is carried then is only in the pre-restore backup (docs/backup-format.md says so).
    if (this.revoked.machines.length > 0 && options.machines) {
      for (const machine of this.revoked.machines) {
        const [row] = await restored.query('SELECT id, active FROM machines WHERE license_id = ? AND hardware_id = ?', [machine.license_id as string, machine.hardware_id as string]);
        if (row && !asBool(row.active)) continue;
        if (!row && (await restored.query('SELECT 1 FROM licenses WHERE id = ?', [machine.license_id as string])).length === 0) continue;
        if (this.keep) {
          if (row) {
            await restored.execute('UPDATE machines SET active = ?, deactivated_at = ? WHERE id = ?', [false, toSqlValue(machine.deactivated_at), String(row.id)]);
          } else {
            // With the columns the restored data has: a backup of schema 4 to 12 gets its
            // machine_key column, empty, by migration after the swap (a shut-out machine needs none).
            const columns = machineColumns(options);
            await restored.execute(
              `INSERT INTO machines (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`,
              columns.map((column) => toSqlValue(machine[column])),
            );
          }
        }
        carried.machines.push({ id: String(row?.id ?? machine.id), license_id: String(machine.license_id), hardware_id: String(machine.hardware_id) });
      }
    }
    // A backup from before activation requests gets its table by migration after the swap,
    // empty; one from before their digests gets the rows without (request-checkout.ts
    // compares such a row by the machine's recorded key).
    if (options.activationRequests) {
      const columns = nonceColumns(options);
      for (const row of this.revoked.activationRequests) {
        await restored.execute(
          `INSERT INTO activation_requests (${columns.join(', ')}) VALUES (${columns.map(() => '?').join(', ')}) ON CONFLICT (nonce) DO NOTHING`,
          columns.map((column) => toSqlValue(row[column])),
        );
      }
    }
    this.carried = carried;
  }

  get result(): CarriedRevocations {
    return this.carried;
  }
}

/**
 * What a restore carried over from the replaced database. `admin_tokens` were revoked
 * again; `licenses` and `customers` were deactivated there and active in the backup: kept
 * deactivated when `keep`, active again (as in the backup) otherwise.
 */
export interface CarriedRevocations {
  readonly keep: boolean;
  readonly admin_tokens: Array<{ readonly id: string; readonly name: string; readonly prefix: string; readonly revoked_at: string }>;
  readonly licenses: Array<{ readonly id: string; readonly key_prefix: string }>;
  readonly customers: Array<{ readonly id: string; readonly name: string }>;
  readonly machines: Array<{ readonly id: string; readonly license_id: string; readonly hardware_id: string }>;
}

interface Revoked {
  readonly adminTokens: ReadonlyArray<{ readonly id: string; readonly tokenHash: string; readonly revokedAt: string }>;
  readonly licenses: ReadonlyArray<Deactivated>;
  readonly customers: ReadonlyArray<Deactivated>;
  readonly machines: ReadonlyArray<Row>;
  readonly activationRequests: ReadonlyArray<Row>;
}

/** Which of the tables (and columns) that not every schema version has a database holds. */
export interface CarryTables {
  readonly machines: boolean;
  /** machines.machine_key (schema 13). */
  readonly machineKeys?: boolean;
  readonly activationRequests?: boolean;
  /** activation_requests.request_digest (schema 14). */
  readonly requestDigests?: boolean;
}

const NONCE_COLUMNS = ['nonce', 'license_id', 'hardware_id', 'created_at', 'used_at'] as const;

/**
 * The columns of machines carried: those the database has, on both ends. A replaced store
 * not yet migrated by this release may be as old as its backup; a machine read from it lacks
 * its key, and gets none in the restored data.
 */
function machineColumns(options: CarryTables): readonly string[] {
  return options.machineKeys === true ? MACHINE_COLUMNS : MACHINE_COLUMNS.filter((column) => column !== 'machine_key');
}

/** The columns of activation_requests carried: the digest where the database has it, on both ends. */
function nonceColumns(options: CarryTables): readonly string[] {
  return options.requestDigests === true ? [...NONCE_COLUMNS, 'request_digest'] : NONCE_COLUMNS;
}


/** A value read from one engine, written back through the other's adapter. */
function toSqlValue(value: unknown): SqlValue {
  if (value === undefined || value === null) return null;
  if (value instanceof Date) return value.toISOString();
  return value as SqlValue;
}

interface Deactivated {
  readonly id: string;
  /** When it was last changed: its deactivation, as far as the row tells. */
  readonly updatedAt: string;
}

function deactivated(row: Record<string, unknown>): Deactivated {
  return { id: String(row.id), updatedAt: asIso(row.updated_at) };
}

/** The tables a carry reads; a database without them (a fresh host) has nothing to carry. */
export const CARRIED_TABLES = ['admin_tokens', 'licenses', 'customers'] as const;
