import { randomUUID } from 'node:crypto';
import { recordAudit } from '../audit.js';
import { now, type OperationContext } from '../context.js';
import { LicenseServerError } from '../errors.js';
import { raiseLicenseEvent } from '../notifications/license-events.js';
import type { Keyset, ListFilters } from '../cursor.js';
import { countRows, pageQuery, fetchPage, unindexedBoolean, unindexedText, type ListCount, type ListPage, type Page, type PageQuery } from '../paging.js';
import type { Database, Engine, Queryable, Row, SqlValue } from '../storage/types.js';
import { asBool, asIso, asIsoOrNull } from '../storage/values.js';
import { describe, parseUuid } from '../validate.js';

/**
 * A machine is one (license, hardware ID) pair: recorded the first time it validates online
 * or is checked out to a file, and the unit that `max_machines` counts.
 *
 * A machine holds one of its license's seats while any of these is true:
 * - it is active and the license is node-locked (not floating);
 * - its lease runs: `lease_expires_at` is the end of the newest grace token it was given
 *   (on a floating license, that token's end is the lease's end);
 * - an offline file checked out for it is still valid (`offline_until`).
 * So a seat is never free while something signed for that machine could still be used
 * offline, and the limit holds against files and tokens already in the wild. The one
 * exception is an operator's: a file declared lost (releaseLostFiles), audited.
 *
 * Every change that can take or free a seat runs under the license's lock (lockLicense);
 * the one write made without it, a validation renewing the lease of a machine that holds a
 * seat, is conditional on the machine still holding it (see touch).
 */
export interface Machine {
  readonly id: string;
  readonly license_id: string;
  readonly hardware_id: string;
  readonly name: string | null;
  readonly client_version: string | null;
  readonly active: boolean;
  readonly holds_seat: boolean;
  readonly first_seen: string;
  readonly last_seen: string;
  readonly lease_expires_at: string | null;
  readonly offline_until: string | null;
  readonly deactivated_at: string | null;
  /** The X25519 public key of the activation request it was last checked out from (see AdmissionRequest.machineKey). */
  readonly machine_key: string | null;
}

/** What of a license decides how its seats are counted. */
export interface SeatPolicy {
  readonly id: string;
  readonly max_machines: number | null;
  readonly floating: boolean;
  readonly lease_hours: number;
}

export type AdmissionRefusal = 'MACHINE_LIMIT_EXCEEDED' | 'MACHINE_DEACTIVATED';

export type Admission =
  | { readonly admitted: true; readonly machine: Machine; readonly leaseExpiresAt: Date | null; /** Recorded by this admission. */ readonly created: boolean }
  | { readonly admitted: false; readonly reason: AdmissionRefusal; readonly message: string };

export interface AdmissionRequest {
  readonly hardwareId: string;
  readonly clientVersion?: string;
  readonly name?: string;
  /** A grace token about to be issued ends here: the seat is held until then. */
  readonly leaseUntil?: Date;
  /** An offline file about to be issued ends here: the seat is held until then. */
  readonly offlineUntil?: Date;
  /**
   * The machine key (unpadded base64url) of the activation request being checked out: the
   * machine's record keeps the newest, and online answers of a machine-key license seal the
   * decryption key to it. Only a checkout gives one: an operator took that request.
   */
  readonly machineKey?: string;
}

/**
 * Bookkeeping a validation can skip: last_seen and the lease are written at most once a
 * minute per machine, so a busy machine costs a read, not a write, per validation. A lease
 * not written is not extended: the token issued then ends where the stored lease ends.
 */
export const BOOKKEEPING_RESOLUTION_MS = 60_000;

/** Every column of a machine row, in table order: for reads here, the validation query and restores. */
export const MACHINE_COLUMNS = [
  'id', 'license_id', 'hardware_id', 'name', 'client_version', 'active', 'first_seen', 'last_seen',
  'lease_expires_at', 'offline_until', 'deactivated_at', 'machine_key',
] as const;
const COLUMNS = `${MACHINE_COLUMNS.map((column) => `m.${column}`).join(', ')}, l.floating`;
const FROM = 'FROM machines m JOIN licenses l ON l.id = m.license_id';

/**
 * Admits a machine to a license inside the caller's transaction, or says why not. Only a
 * machine that does not already hold a seat is counted against `max_machines`, and that
 * count runs under the license's lock (lockLicense), so processes admitting machines at the
 * same moment can never take more seats than the limit.
 *
 * A validation of a machine that holds a seat (the common case) takes no lock: it costs a
 * read, and a write at most once a minute (BOOKKEEPING_RESOLUTION_MS) that renews its lease
 * only if the machine still holds its seat when the write runs. A release, a deactivation or
 * a file declared lost that committed after the read makes that write change nothing, and
 * the admission is decided again under the lock. A checkout always takes the lock.
 */
export async function admitMachine(
  tx: Queryable,
  engine: Engine,
  license: SeatPolicy,
  request: AdmissionRequest,
  context: OperationContext,
  probed?: MachineProbe,
): Promise<Admission> {
  let at = now(context);
  const limited = license.max_machines !== null;
  let row = probed ? probed.row : await findMachineRow(tx, license.id, request.hardwareId);
  if (row && !asBool(row.active)) return deactivated(row);
  if (row && request.offlineUntil === undefined && (!limited || holdsSeat(row, license.floating, new Date(at.getTime() + FAST_PATH_MARGIN_MS)))) {
    const touched = await touch(tx, row, request, at, limited ? { floating: license.floating } : undefined);
    if (touched) return touched;
    // Changed since it was read: deactivated, or its seat freed.
    row = await findMachineRow(tx, license.id, request.hardwareId);
    if (row && !asBool(row.active)) return deactivated(row);
  }
  if (limited) {
    await lockLicense(tx, engine, license.id);
    // Under the lock, what another process committed meanwhile is visible, and the time is
    // read again: a lease that ran out while this transaction waited holds no seat.
    at = now(context);
    row = await findMachineRow(tx, license.id, request.hardwareId);
    if (row && !asBool(row.active)) return deactivated(row);
    if (!(row && holdsSeat(row, license.floating, at))) {
      const used = await countSeats(tx, license, at);
      if (used >= license.max_machines!) {
        return {
          admitted: false,
          reason: 'MACHINE_LIMIT_EXCEEDED',
          message: seatsTaken(license.max_machines, 'this license'),
        };
      }
    }
  }
  const leaseUntil = request.leaseUntil ?? null;
  if (!row && !limited) {
    // A new machine takes the license's lock even without a limit: a hw1 machine moving to
    // this hardware ID (migrateMachine) holds it, and must not find the ID taken between its
    // look-up and its move. Only the first validation of a machine pays for it.
    await lockLicense(tx, engine, license.id);
    row = await findMachineRow(tx, license.id, request.hardwareId);
    if (row && !asBool(row.active)) return deactivated(row);
  }
  if (!row) {
    const id = randomUUID();
    const stamp = at.toISOString();
    const inserted = await tx.execute(
      `INSERT INTO machines (id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, lease_expires_at, offline_until, machine_key)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (license_id, hardware_id) DO NOTHING`,
      [id, license.id, request.hardwareId, request.name ?? null, request.clientVersion ?? null, true, stamp, stamp,
        leaseUntil?.toISOString() ?? null, request.offlineUntil?.toISOString() ?? null, request.machineKey ?? null],
    );
    if (inserted === 1) {
      await recordAudit(tx, context, {
        action: 'machine.activated',
        entityType: 'machine',
        entityId: id,
        details: { license_id: license.id, hardware_id: request.hardwareId, name: request.name ?? null, client_version: request.clientVersion ?? null },
      });
      await raiseLicenseEvent(tx, 'machine.activated', license.id, {
        machine_id: id,
        hardware_id: request.hardwareId,
        machine_name: request.name ?? null,
        client_version: request.clientVersion ?? null,
        actor: context.actor,
      }, context);
      const machine = await getMachineRow(tx, id);
      return { admitted: true, machine: toMachine(machine, at), leaseExpiresAt: leaseUntil, created: true };
    }
    // A license without a limit takes no lock: another validation of this machine won the insert.
    row = (await findMachineRow(tx, license.id, request.hardwareId))!;
    if (!asBool(row.active)) return deactivated(row);
  }
  const touched = await touch(tx, row, request, at);
  if (touched) return touched;
  // Only without a limit (under the lock nothing changes a machine): deactivated meanwhile.
  return deactivated((await findMachineRow(tx, license.id, request.hardwareId))!);
}

/**
 * A machine that changed how it derives its hardware ID keeps its record and its seat
 * (docs/client.md, "Moving from hw1 to hw2"): the row of `previousHardwareId` takes the new
 * ID, audited as `machine.migrated`. Only from a `hw1-` ID to a `hw2-` one, and only when the
 * license has no machine with the new ID; anything else leaves
 * the machines as they are. Under the license's lock, and the new ID is looked up again
 * under it, so two validations at once move the record once. Returns the row of the new ID
 * when there is one now (moved, or recorded meanwhile by another validation).
 */
export async function migrateMachine(
  tx: Queryable,
  engine: Engine,
  licenseId: string,
  ids: { readonly hardwareId: string; readonly previousHardwareId: string },
  context: OperationContext,
): Promise<Row | undefined> {
  const { hardwareId, previousHardwareId } = ids;
  if (!previousHardwareId.startsWith('hw1-') || !hardwareId.startsWith('hw2-')) return undefined;
  await lockLicense(tx, engine, licenseId);
  const current = await findMachineRow(tx, licenseId, hardwareId);
  if (current) return current;
  const previous = await findMachineRow(tx, licenseId, previousHardwareId);
  // A deactivated machine moves too, deactivated: an operator's deactivation must not be
  // escaped by upgrading the client (the new ID would otherwise be admitted as a new machine).
  if (!previous) return undefined;
  const moved = await tx.execute('UPDATE machines SET hardware_id = ? WHERE id = ? AND hardware_id = ?', [
    hardwareId,
    String(previous.id),
    previousHardwareId,
  ]);
  if (moved !== 1) return undefined;
  await recordAudit(tx, context, {
    action: 'machine.migrated',
    entityType: 'machine',
    entityId: String(previous.id),
    details: { license_id: licenseId, hardware_id: hardwareId, previous_hardware_id: previousHardwareId },
  });
  await raiseLicenseEvent(tx, 'machine.migrated', licenseId, {
    machine_id: String(previous.id),
    hardware_id: hardwareId,
    previous_hardware_id: previousHardwareId,
    actor: context.actor,
  }, context);
  return getMachineRow(tx, String(previous.id));
}

/**
 * How long past now a machine must hold its seat for a validation to renew its lease
 * without the lock. The check runs at the time the transaction began; an admission under
 * the lock that began later, after the seat had run out, counts it free. This margin keeps
 * the two apart unless a transaction takes a minute (or daemons' clocks differ by that).
 */
const FAST_PATH_MARGIN_MS = BOOKKEEPING_RESOLUTION_MS;

/**
 * Takes the lock every change of a license's seats runs under, until the transaction ends:
 * PostgreSQL locks the license's row (SELECT ... FOR UPDATE); on SQLite every write
 * transaction already holds the database's write lock (BEGIN IMMEDIATE).
 */
export async function lockLicense(tx: Queryable, engine: Engine, licenseId: string): Promise<void> {
  if (engine === 'postgres') await tx.query('SELECT id FROM licenses WHERE id = ? FOR UPDATE', [licenseId]);
}

/** What the caller already read of the machine (getLicenseWithMachine), saving a query. */
export interface MachineProbe {
  /** The machine's row, or undefined when the hardware ID is new to the license. */
  readonly row: Row | undefined;
  /** The license's decryption key (null: none). Never log it. */
  readonly decryptionKey: Buffer | null;
}

/**
 * Records a validation or checkout of a machine already on the license: last_seen, a longer
 * lease or offline hold, its version and name. Undefined when the write changed nothing
 * because the machine no longer qualifies: deactivated meanwhile, or, with `whileHolding`
 * (the unlocked path), no longer holding its seat. PostgreSQL evaluates an UPDATE's WHERE
 * again on the newest committed row after waiting for a concurrent writer, so a lease that
 * a concurrent change ended is never written back.
 */
async function touch(
  tx: Queryable,
  row: Row,
  request: AdmissionRequest,
  at: Date,
  whileHolding?: { readonly floating: boolean },
): Promise<Admission | undefined> {
  const lastSeen = Date.parse(asIso(row.last_seen));
  const lease = asIsoOrNull(row.lease_expires_at);
  const offline = asIsoOrNull(row.offline_until);
  const wanted = request.leaseUntil?.getTime();
  const extendsLease = wanted !== undefined && (lease === null || wanted - Date.parse(lease) >= BOOKKEEPING_RESOLUTION_MS);
  const extendsOffline = request.offlineUntil !== undefined && (offline === null || request.offlineUntil.getTime() > Date.parse(offline));
  const changes: string[] = [];
  const params: SqlValue[] = [];
  if (extendsLease) changes.push('lease_expires_at = ?'), params.push(new Date(wanted).toISOString());
  if (extendsOffline) changes.push('offline_until = ?'), params.push(request.offlineUntil!.toISOString());
  if (request.clientVersion !== undefined && request.clientVersion !== row.client_version) changes.push('client_version = ?'), params.push(request.clientVersion);
  if (request.name !== undefined && request.name !== row.name) changes.push('name = ?'), params.push(request.name);
  if (request.machineKey !== undefined && request.machineKey !== row.machine_key) changes.push('machine_key = ?'), params.push(request.machineKey);
  if (changes.length > 0 || at.getTime() - lastSeen >= BOOKKEEPING_RESOLUTION_MS) {
    const conditions = ['id = ?', 'active = ?'];
    const conditionParams: SqlValue[] = [String(row.id), true];
    if (whileHolding?.floating) {
      const stamp = new Date(at.getTime() + FAST_PATH_MARGIN_MS).toISOString();
      conditions.push('(lease_expires_at > ? OR offline_until > ?)');
      conditionParams.push(stamp, stamp);
    }
    const changed = await tx.execute(
      `UPDATE machines SET ${[...changes, 'last_seen = ?'].join(', ')} WHERE ${conditions.join(' AND ')}`,
      [...params, at.toISOString(), ...conditionParams],
    );
    if (changed === 0) return undefined;
    row = await getMachineRow(tx, String(row.id));
  }
  // Not extended: the token ends where the stored lease does, never later than recorded.
  const leaseExpiresAt = wanted === undefined ? null : extendsLease ? new Date(wanted) : new Date(Math.min(wanted, Date.parse(lease!)));
  return { admitted: true, machine: toMachine(row, at), leaseExpiresAt, created: false };
}

function deactivated(row: Row): Admission {
  return {
    admitted: false,
    reason: 'MACHINE_DEACTIVATED',
    message: `this machine was deactivated for the license at ${asIsoOrNull(row.deactivated_at) ?? 'an unknown time'}`,
  };
}

function holdsSeat(row: Row, floating: boolean, at: Date): boolean {
  const stamp = at.getTime();
  if (asBool(row.active) && !floating) return true;
  const lease = asIsoOrNull(row.lease_expires_at);
  const offline = asIsoOrNull(row.offline_until);
  return (lease !== null && Date.parse(lease) > stamp) || (offline !== null && Date.parse(offline) > stamp);
}

/**
 * The rule in the comment on Machine as SQL over `machines m JOIN licenses l`, for lists and
 * counts of many licenses at once.
 */
export function seatHeld(at: Date): { readonly sql: string; readonly params: SqlValue[] } {
  const stamp = at.toISOString();
  return { sql: '((m.active = ? AND l.floating = ?) OR m.lease_expires_at > ? OR m.offline_until > ?)', params: [true, false, stamp, stamp] };
}

/** Seats in use now, by the rule in the comment on Machine. */
export async function countSeats(db: Queryable, license: Pick<SeatPolicy, 'id' | 'floating'>, at: Date): Promise<number> {
  const stamp = at.toISOString();
  const held = license.floating ? 'lease_expires_at > ? OR offline_until > ?' : 'active = ? OR lease_expires_at > ? OR offline_until > ?';
  const rows = await db.query<{ used: unknown }>(`SELECT count(*) AS used FROM machines WHERE license_id = ? AND (${held})`, [
    license.id,
    ...(license.floating ? [] : [true]),
    stamp,
    stamp,
  ]);
  return Number(rows[0]?.used ?? 0);
}

async function findMachineRow(db: Queryable, licenseId: string, hardwareId: string): Promise<Row | undefined> {
  const rows = await db.query(`SELECT ${COLUMNS} ${FROM} WHERE m.license_id = ? AND m.hardware_id = ?`, [licenseId, hardwareId]);
  return rows[0];
}

async function getMachineRow(db: Queryable, id: string): Promise<Row> {
  const rows = await db.query(`SELECT ${COLUMNS} ${FROM} WHERE m.id = ?`, [id]);
  if (!rows[0]) throw new LicenseServerError('MACHINE_NOT_FOUND', `no machine has the id ${describe(id)}`);
  return rows[0];
}

export async function getMachine(db: Queryable, id: string, at: Date = new Date()): Promise<Machine> {
  return toMachine(await getMachineRow(db, parseUuid(id, 'machine id')), at);
}

/** What a list of machines can be narrowed to; the members combine with AND. */
export interface MachineConditions {
  readonly licenseId?: string;
  /** Only machines that hold (or do not hold) a seat now. */
  readonly holdingSeat?: boolean;
  /** Deactivated by an operator (false) or not (true). */
  readonly active?: boolean;
  readonly hardwareId?: string;
  /** On last_seen (written at most once a minute, BOOKKEEPING_RESOLUTION_MS): at or after / before. */
  readonly lastSeenAfter?: Date;
  readonly lastSeenBefore?: Date;
}

export interface MachineFilter extends Page, MachineConditions {}

export const MACHINE_KEYSET: Keyset = {
  list: 'machines',
  keys: [{ column: 'm.first_seen', field: 'first_seen', kind: 'timestamp' }, { column: 'm.id', field: 'id', kind: 'uuid' }],
};

/**
 * The WHERE conditions over `machines m JOIN licenses l` at `at`, and what a cursor is bound
 * to. Whether a machine holds a seat depends on the time and its license, so that filter is
 * checked on the rows an index gives rather than by an index. A license's machines and a
 * hardware ID's are few: read by their index (license_id; hardware_id, migration 16), the
 * other filters checked per row.
 */
export function machineWhere(conditions: MachineConditions, at: Date): { where: string[]; params: SqlValue[]; filters: ListFilters } {
  const where: string[] = [];
  const params: SqlValue[] = [];
  const licenseId = conditions.licenseId === undefined ? undefined : parseUuid(conditions.licenseId, 'license id');
  const hardwareId = conditions.hardwareId === undefined ? undefined : parseHardwareIdFilter(conditions.hardwareId);
  if (licenseId !== undefined) {
    where.push('m.license_id = ?');
    params.push(licenseId);
  }
  if (hardwareId !== undefined) {
    where.push(`${licenseId === undefined ? 'm.hardware_id' : unindexedText('m.hardware_id')} = ?`);
    params.push(hardwareId);
  }
  if (conditions.active !== undefined) {
    where.push(`${unindexedBoolean('m.active')} = ?`);
    params.push(conditions.active);
  }
  if (conditions.holdingSeat !== undefined) {
    const holding = seatHeld(at);
    // A machine without a lease or offline file compares NULL there: NOT alone would drop it
    // from the machines that hold no seat.
    where.push(conditions.holdingSeat ? holding.sql : `NOT COALESCE(${holding.sql}, ?)`);
    params.push(...holding.params, ...(conditions.holdingSeat ? [] : [false]));
  }
  const after = conditions.lastSeenAfter?.toISOString();
  const before = conditions.lastSeenBefore?.toISOString();
  if (after !== undefined) where.push('m.last_seen >= ?'), params.push(after);
  if (before !== undefined) where.push('m.last_seen < ?'), params.push(before);
  return {
    where,
    params,
    filters: { license_id: licenseId, holding_seat: conditions.holdingSeat, active: conditions.active, hardware_id: hardwareId, last_seen_after: after, last_seen_before: before },
  };
}

/** One page of machines, oldest first (by first seen), so that pages stay stable while machines are added. */
export function machineListQuery(filter: MachineFilter = {}, at: Date = new Date()): PageQuery {
  const { where, params, filters } = machineWhere(filter, at);
  return pageQuery(`SELECT ${COLUMNS} ${FROM}`, where, params, MACHINE_KEYSET, filters, filter);
}

/** How many machines the filter selects at `at` (exact up to paging.ts COUNT_BOUND). */
export async function countMachines(db: Queryable, conditions: MachineConditions = {}, at: Date = new Date(), bound?: number): Promise<ListCount> {
  const { where, params } = machineWhere(conditions, at);
  return countRows(db, FROM, where, params, bound);
}

function parseHardwareIdFilter(value: string): string {
  if (value.length === 0 || value.length > 200 || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new LicenseServerError('INVALID_INPUT', `hardware_id must be 1-200 characters without control characters, got ${describe(value.slice(0, 40))}`);
  }
  return value;
}

export async function listMachinesPage(db: Queryable, filter: MachineFilter = {}, at: Date = new Date()): Promise<ListPage<Machine>> {
  return fetchPage(db, machineListQuery(filter, at), (row) => toMachine(row, at));
}

export async function listMachines(db: Queryable, filter: MachineFilter = {}, at: Date = new Date()): Promise<Machine[]> {
  return (await listMachinesPage(db, filter, at)).items;
}

export interface MachineChange {
  readonly machine: Machine;
  /** Said to the operator: what still holds the seat, or why nothing changed. */
  readonly warnings: readonly string[];
}

/**
 * Deactivates a machine: its next online validation is refused (MACHINE_DEACTIVATED) until
 * it is activated again, and its seat is free once nothing signed for it is still valid
 * (an offline file, a grace token): until then it keeps counting, and the warning says so.
 */
export async function deactivateMachine(db: Database, id: string, context: OperationContext): Promise<MachineChange> {
  const machineId = parseUuid(id, 'machine id');
  return db.transaction(async (tx) => {
    await lockLicense(tx, db.engine, String((await getMachineRow(tx, machineId)).license_id));
    const at = now(context);
    const before = toMachine(await getMachineRow(tx, machineId), at);
    if (before.active) {
      await tx.execute('UPDATE machines SET active = ?, deactivated_at = ? WHERE id = ?', [false, at.toISOString(), machineId]);
      await recordAudit(tx, context, {
        action: 'machine.deactivated',
        entityType: 'machine',
        entityId: machineId,
        details: { license_id: before.license_id, hardware_id: before.hardware_id },
      });
    }
    const machine = toMachine(await getMachineRow(tx, machineId), at);
    const warnings: string[] = [];
    if (!before.active) warnings.push('the machine was already deactivated; nothing changed');
    warnings.push(...seatStillHeld(machine, at));
    return { machine, warnings };
  });
}

/**
 * Why a machine's seat stays taken after an operator freed what they could, said so that
 * the operator knows until when, and what frees it sooner when anything can.
 */
function seatStillHeld(machine: Machine, at: Date): string[] {
  if (!machine.holds_seat) return [];
  const running = (end: string | null): end is string => end !== null && Date.parse(end) > at.getTime();
  const warnings: string[] = [];
  if (running(machine.lease_expires_at)) {
    warnings.push(`its seat stays taken until ${machine.lease_expires_at}: the grace token given to it is valid until then and cannot be recalled`);
  }
  if (running(machine.offline_until)) {
    warnings.push(
      `its seat stays taken until ${machine.offline_until}: an offline file checked out for it is valid until then ` +
        `(if that file was lost, \`license-server machine release ${machine.id} --lost-file\` frees the seat)`,
    );
  }
  if (warnings.length === 0) warnings.push('it keeps its seat while it is active on a node-locked license: deactivate it to free the seat');
  return warnings;
}

/** Why a machine is refused a seat, in words that also fit a limit of one. */
function seatsTaken(max: number, license: string): string {
  return max === 1
    ? `${license} allows 1 machine at a time, and another machine holds its seat`
    : `${license} allows ${max} machines at a time, and other machines hold all ${max} seats`;
}

/** Lets a deactivated machine validate again; it needs a free seat like a new machine. */
export async function reactivateMachine(db: Database, id: string, context: OperationContext): Promise<MachineChange> {
  const machineId = parseUuid(id, 'machine id');
  return db.transaction(async (tx) => {
    const at = now(context);
    const row = await getMachineRow(tx, machineId);
    if (asBool(row.active)) return { machine: toMachine(row, at), warnings: ['the machine is already active; nothing changed'] };
    const license = await seatPolicyOf(tx, db.engine, String(row.license_id));
    // Already counted while an offline file or token holds its seat; otherwise it takes one now.
    if (license.max_machines !== null && !license.floating && !holdsSeat(row, license.floating, at)) {
      const used = await countSeats(tx, license, at);
      if (used >= license.max_machines) {
        throw new LicenseServerError('MACHINE_LIMIT_EXCEEDED', seatsTaken(license.max_machines, `license ${license.id}`), {
          hint: 'Free a seat first (`machine deactivate ID`, or `machine release ID --lost-file` for a lost offline file), or raise the limit with `license update --max-machines`.',
        });
      }
    }
    await tx.execute('UPDATE machines SET active = ?, deactivated_at = NULL WHERE id = ?', [true, machineId]);
    await recordAudit(tx, context, {
      action: 'machine.reactivated',
      entityType: 'machine',
      entityId: machineId,
      details: { license_id: String(row.license_id), hardware_id: String(row.hardware_id) },
    });
    return { machine: toMachine(await getMachineRow(tx, machineId), at), warnings: [] };
  });
}

/** What a floating machine giving its seat back learns: when the seat is free. */
export interface LeaseRelease {
  /** True when the machine held a running lease. */
  readonly released: boolean;
  /** When its seat is free, unless it validates again meanwhile; null when it holds none. */
  readonly seatFreeAt: Date | null;
  /** True when an offline file holds the seat past the lease. */
  readonly heldByFile: boolean;
}

/**
 * A floating machine gives its seat back (the client's `release()`). The seat cannot be
 * free before the grace token last given to the machine has ended: a copy of that token
 * keeps working offline until then, whatever the client says. On a floating license that
 * token ends with the lease (it never outlives it), so nothing is written: the answer is
 * when the seat frees, the end of the lease, or of an offline file when that ends later.
 */
export async function releaseLease(db: Queryable, license: SeatPolicy, hardwareId: string, context: OperationContext): Promise<LeaseRelease> {
  const at = now(context);
  const row = license.floating ? await findMachineRow(db, license.id, hardwareId) : undefined;
  if (!row || !holdsSeat(row, license.floating, at)) return { released: false, seatFreeAt: null, heldByFile: false };
  const [lease, file] = [asIsoOrNull(row.lease_expires_at), asIsoOrNull(row.offline_until)].map((end) => (end === null ? 0 : Date.parse(end))) as [number, number];
  return { released: lease > at.getTime(), seatFreeAt: new Date(Math.max(lease, file)), heldByFile: file > lease };
}

/**
 * An operator declares every offline file of a machine lost (a checkout whose file never
 * reached its machine, a USB stick gone missing): the seat those files held is free now,
 * audited as `machine.offline_files_released` with the hold given up. A file found again
 * keeps verifying until it ends, on a seat that may have gone to another machine: the one
 * exception to "no seat goes while something signed for it works", made on purpose.
 */
export async function releaseLostFiles(db: Database, id: string, options: { readonly reason?: string }, context: OperationContext): Promise<MachineChange> {
  const machineId = parseUuid(id, 'machine id');
  const reason = options.reason === undefined ? null : parseReason(options.reason);
  return db.transaction(async (tx) => {
    await lockLicense(tx, db.engine, String((await getMachineRow(tx, machineId)).license_id));
    const at = now(context);
    const before = toMachine(await getMachineRow(tx, machineId), at);
    const warnings: string[] = [];
    if (before.offline_until === null || Date.parse(before.offline_until) <= at.getTime()) {
      warnings.push('no offline file of this machine is valid; nothing changed');
    } else {
      await tx.execute('UPDATE machines SET offline_until = NULL WHERE id = ?', [machineId]);
      await recordAudit(tx, context, {
        action: 'machine.offline_files_released',
        entityType: 'machine',
        entityId: machineId,
        details: { license_id: before.license_id, hardware_id: before.hardware_id, offline_until: before.offline_until, reason },
      });
    }
    const machine = toMachine(await getMachineRow(tx, machineId), at);
    warnings.push(...seatStillHeld(machine, at));
    return { machine, warnings };
  });
}

function parseReason(reason: string): string {
  if (reason.length === 0 || reason.length > 500 || /[\u0000-\u001f\u007f]/.test(reason)) {
    throw new LicenseServerError('INVALID_INPUT', 'reason must be 1-500 characters without control characters');
  }
  return reason;
}

/**
 * Whether a machine may report usage for a license (POST /api/v1/usage): on a license with
 * a machine limit only a machine that holds a seat now, so that a leaked key cannot spend a
 * quota from machines the limit keeps out; on any license, never a deactivated machine.
 * Throws SEAT_REQUIRED or MACHINE_DEACTIVATED.
 */
export async function checkReportingMachine(db: Queryable, license: SeatPolicy, hardwareId: string, at: Date): Promise<void> {
  const row = await findMachineRow(db, license.id, hardwareId);
  if (row && !asBool(row.active)) {
    throw new LicenseServerError('MACHINE_DEACTIVATED', `usage is not counted from this machine: it was deactivated at ${asIsoOrNull(row.deactivated_at) ?? 'an unknown time'}`);
  }
  if (license.max_machines !== null && !(row && holdsSeat(row, license.floating, at))) {
    throw new LicenseServerError(
      'SEAT_REQUIRED',
      row ? 'usage is not counted from this machine: it holds no seat of the license now' : 'usage is not counted from this machine: it is not a machine of the license',
    );
  }
}

/** Reads the seat policy of a license, locking its row on PostgreSQL. */
async function seatPolicyOf(tx: Queryable, engine: Engine, licenseId: string): Promise<SeatPolicy> {
  const rows = await tx.query(`SELECT id, max_machines, floating, lease_hours FROM licenses WHERE id = ?${engine === 'postgres' ? ' FOR UPDATE' : ''}`, [licenseId]);
  const row = rows[0]!;
  return {
    id: String(row.id),
    max_machines: row.max_machines === null ? null : Number(row.max_machines),
    floating: asBool(row.floating),
    lease_hours: Number(row.lease_hours),
  };
}

function toMachine(row: Row, at: Date): Machine {
  return {
    id: String(row.id),
    license_id: String(row.license_id),
    hardware_id: String(row.hardware_id),
    name: row.name === null || row.name === undefined ? null : String(row.name),
    client_version: row.client_version === null || row.client_version === undefined ? null : String(row.client_version),
    active: asBool(row.active),
    holds_seat: holdsSeat(row, asBool(row.floating), at),
    first_seen: asIso(row.first_seen),
    last_seen: asIso(row.last_seen),
    lease_expires_at: asIsoOrNull(row.lease_expires_at),
    offline_until: asIsoOrNull(row.offline_until),
    deactivated_at: asIsoOrNull(row.deactivated_at),
    machine_key: row.machine_key === null || row.machine_key === undefined ? null : String(row.machine_key),
  };
}
