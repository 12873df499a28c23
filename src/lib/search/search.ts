import { LicenseServerError } from '../errors.js';
import { licenseKeyPrefix } from '../licensing/license-key.js';
import type { Database, Engine, Queryable, Row, SqlValue } from '../storage/types.js';
import { asBool, asIso, asIsoOrNull } from '../storage/values.js';
import { describe, hasLoneSurrogate, isUuid } from '../validate.js';
import { keyQuery, prefixRange, type Range } from './ranges.js';

/**
 * One search box (issue 36): whatever was typed, every kind of record it can name, each
 * group found through an index (migration 15 says which). A query is read at once as:
 * - a license key, whole or any prefix of it (ranges.ts: keyQuery);
 * - a customer's name or email: any substring of 3 characters or more, case-insensitive,
 *   or the start of either for a shorter query (a trigram index cannot answer those);
 * - a machine's hardware ID, whole or a prefix (exact case), or the start of its name
 *   (case-insensitive);
 * - an entitlement's code, whole or a prefix;
 * - the id (a UUID) of a license, customer, machine, entitlement, admin token or
 *   notification delivery; audit entries are found by their own number or by the id of the
 *   record they are about.
 */
export const SEARCH_KINDS = ['licenses', 'customers', 'machines', 'entitlements', 'admin_tokens', 'audit_entries', 'notification_deliveries'] as const;
export type SearchKind = (typeof SEARCH_KINDS)[number];

export const SEARCH_MAX_QUERY_LENGTH = 200;
export const SEARCH_DEFAULT_LIMIT = 10;
export const SEARCH_MAX_LIMIT = 50;
/** Below this many characters a name or email is matched by its start, not anywhere in it. */
export const SUBSTRING_MIN_LENGTH = 3;

export interface SearchOptions {
  /** Items per group, 1 to 50 (default 10). */
  readonly limit?: number;
  /** The groups to search (default all): a caller leaves out what its user may not see. */
  readonly kinds?: readonly SearchKind[];
  /**
   * How many symbols of a key prefix are matched (default all). A caller that shows only
   * key prefixes passes their length: matching more would let a user learn a whole key one
   * symbol at a time from whether a longer prefix still finds the license.
   */
  readonly keyPrefixSymbols?: number;
}

export interface SearchGroup<T> {
  readonly items: T[];
  /** Whether more than `limit` records matched. */
  readonly more: boolean;
}

export type MatchedBy = 'id' | 'key' | 'key_prefix' | 'name' | 'email' | 'hardware_id' | 'code' | 'entity_id';

export interface LicenseMatch {
  readonly id: string;
  readonly key: string;
  readonly key_prefix: string;
  readonly customer_id: string;
  readonly customer_name: string;
  readonly type: string;
  readonly valid_until: string;
  readonly active: boolean;
  readonly matched: MatchedBy;
}

export interface CustomerMatch {
  readonly id: string;
  readonly name: string;
  readonly email: string | null;
  readonly active: boolean;
  readonly matched: MatchedBy;
}

export interface MachineMatch {
  readonly id: string;
  readonly hardware_id: string;
  readonly name: string | null;
  readonly license_id: string;
  readonly active: boolean;
  readonly matched: MatchedBy;
}

export interface EntitlementMatch {
  readonly id: string;
  readonly code: string;
  readonly name: string;
  readonly matched: MatchedBy;
}

export interface AdminTokenMatch {
  readonly id: string;
  readonly name: string;
  readonly scopes: string[];
  readonly expires_at: string | null;
  readonly revoked: boolean;
  readonly matched: MatchedBy;
}

export interface AuditEntryMatch {
  readonly id: number;
  readonly occurred_at: string;
  readonly actor: string;
  readonly action: string;
  readonly entity_type: string;
  readonly entity_id: string | null;
  readonly matched: MatchedBy;
}

export interface DeliveryMatch {
  readonly id: string;
  readonly event: string;
  readonly channel: string;
  readonly status: string;
  readonly created_at: string;
  readonly matched: MatchedBy;
}

export interface SearchResults {
  readonly query: string;
  readonly licenses?: SearchGroup<LicenseMatch>;
  readonly customers?: SearchGroup<CustomerMatch>;
  readonly machines?: SearchGroup<MachineMatch>;
  readonly entitlements?: SearchGroup<EntitlementMatch>;
  readonly admin_tokens?: SearchGroup<AdminTokenMatch>;
  readonly audit_entries?: SearchGroup<AuditEntryMatch>;
  readonly notification_deliveries?: SearchGroup<DeliveryMatch>;
}

/** The query as searched: trimmed; INVALID_INPUT when empty, too long, or holding control characters. */
export function parseSearchQuery(value: string | undefined): string {
  const query = (value ?? '').trim();
  if (query === '') throw new LicenseServerError('INVALID_INPUT', 'the search query q must not be empty');
  if ([...query].length > SEARCH_MAX_QUERY_LENGTH) {
    throw new LicenseServerError('INVALID_INPUT', `the search query q must be at most ${SEARCH_MAX_QUERY_LENGTH} characters, got ${[...query].length}`);
  }
  if (/[\u0000-\u001f\u007f]/.test(query) || hasLoneSurrogate(query)) {
    throw new LicenseServerError('INVALID_INPUT', `the search query q must be printable text, got ${describe(query)}`);
  }
  return query;
}

export function parseSearchLimit(value: number | undefined): number {
  if (value === undefined) return SEARCH_DEFAULT_LIMIT;
  if (!Number.isSafeInteger(value) || value < 1 || value > SEARCH_MAX_LIMIT) {
    throw new LicenseServerError('INVALID_INPUT', `limit must be an integer from 1 to ${SEARCH_MAX_LIMIT}, got ${describe(value)}`);
  }
  return value;
}

/** What search() reads: a store, or anything that queries one (tests record the SQL). */
export type SearchSource = Queryable & { readonly engine: Engine; transaction?: Database['transaction'] };

export async function search(source: SearchSource, q: string, options: SearchOptions = {}): Promise<SearchResults> {
  const query = parseSearchQuery(q);
  const limit = parseSearchLimit(options.limit);
  if (source.engine !== 'postgres' || !source.transaction) return searchOn(source, source.engine, query, limit, options);
  // Each query below has an index made for it, but with LIMIT 11 PostgreSQL's planner bets
  // on a sequential scan that stops at the 11th match: right when most rows match, and a
  // read of the whole table when few or none do (at 100k customers, 80-200 ms for a
  // substring found nowhere, against a few ms through the trigram index). Taking the bet
  // off the table keeps every search on its index; where no index fits (pg_trgm missing) the
  // scan is still chosen, as the only plan there is.
  return source.transaction(async (tx) => {
    await tx.execute('SET LOCAL enable_seqscan = off');
    return searchOn(tx, 'postgres', query, limit, options);
  });
}

async function searchOn(db: Queryable, engine: Engine, query: string, limit: number, options: SearchOptions): Promise<SearchResults> {
  const kinds = new Set(options.kinds ?? SEARCH_KINDS);
  const sql = new SearchSql(engine);
  const id = isUuid(query) ? query.toLowerCase() : undefined;
  const results: Record<string, unknown> = { query };
  const finders: Record<SearchKind, () => Promise<SearchGroup<unknown>>> = {
    licenses: () => findLicenses(db, sql, query, id, limit, options.keyPrefixSymbols),
    customers: () => findCustomers(db, sql, query, id, limit),
    machines: () => findMachines(db, sql, query, id, limit),
    entitlements: () => findEntitlements(db, query, id, limit),
    admin_tokens: () => findAdminTokens(db, id, limit),
    audit_entries: () => findAuditEntries(db, query, id, limit),
    notification_deliveries: () => findDeliveries(db, id, limit),
  };
  // One after the other: on SQLite they share one connection anyway, and on PostgreSQL a
  // search should take one pooled connection at a time, not seven.
  for (const kind of SEARCH_KINDS) if (kinds.has(kind)) results[kind] = await finders[kind]();
  return results as unknown as SearchResults;
}

/** The SQL that differs per engine. */
class SearchSql {
  constructor(readonly engine: Engine) {}

  /**
   * A text column compared in code point order: SQLite's BINARY already is; PostgreSQL's
   * columns have the database's collation, so "C" is asked for, as the indexes have it.
   */
  bytes(column: string): string {
    return this.engine === 'postgres' ? `${column} COLLATE "C"` : column;
  }

  /** The column lower-cased, as the *_folded indexes hold it (SQLite's lower() folds ASCII only). */
  folded(column: string): string {
    return this.bytes(`lower(${column})`);
  }

  /** `column` in `range`, with the parameters to bind. */
  inRange(column: string, range: Range): { sql: string; params: SqlValue[] } {
    return range.to === undefined
      ? { sql: `${column} >= ?`, params: [range.from] }
      : { sql: `(${column} >= ? AND ${column} < ?)`, params: [range.from, range.to] };
  }
}

/** Runs `query` for limit + 1 rows: the extra one only says that there are more. */
async function upTo(db: Queryable, sql: string, params: readonly SqlValue[], limit: number): Promise<{ rows: Row[]; more: boolean }> {
  const rows = await db.query(`${sql} LIMIT ?`, [...params, limit + 1]);
  return { rows: rows.slice(0, limit), more: rows.length > limit };
}

/** Groups made of several lookups: first come first, no record twice, `more` from any. */
class GroupBuilder<T extends { readonly id: string | number }> {
  private readonly items: T[] = [];
  private more = false;
  constructor(private readonly limit: number) {}

  /** Rows still wanted; at 0 one more lookup still says whether there are `more`. */
  get room(): number {
    return this.limit - this.items.length;
  }

  add(rows: Row[], more: boolean, toItem: (row: Row) => T): void {
    for (const row of rows) {
      const item = toItem(row);
      if (this.items.some((seen) => seen.id === item.id)) continue;
      if (this.items.length < this.limit) this.items.push(item);
      else this.more = true;
    }
    if (more) this.more = true;
  }

  done(): SearchGroup<T> {
    return { items: this.items, more: this.more };
  }
}

const LICENSE_SELECT = `SELECT l.id, l.license_key, l.customer_id, c.name AS customer_name, l.type, l.valid_until, l.active
  FROM licenses l JOIN customers c ON c.id = l.customer_id`;

async function findLicenses(db: Queryable, sql: SearchSql, query: string, id: string | undefined, limit: number, keyPrefixSymbols?: number): Promise<SearchGroup<LicenseMatch>> {
  const group = new GroupBuilder<LicenseMatch>(limit);
  const toItem = (matched: MatchedBy) => (row: Row): LicenseMatch => ({
    id: String(row.id),
    key: String(row.license_key),
    key_prefix: licenseKeyPrefix(String(row.license_key)),
    customer_id: String(row.customer_id),
    customer_name: String(row.customer_name),
    type: String(row.type),
    valid_until: asIso(row.valid_until),
    active: asBool(row.active),
    matched,
  });
  if (id) {
    const found = await upTo(db, `${LICENSE_SELECT} WHERE l.id = ?`, [id], limit);
    group.add(found.rows, found.more, toItem('id'));
  }
  const key = keyQuery(query, keyPrefixSymbols);
  if (key && 'whole' in key) {
    const found = await upTo(db, `${LICENSE_SELECT} WHERE l.license_key = ?`, [key.whole], limit);
    group.add(found.rows, found.more, toItem('key'));
  } else if (key) {
    // The unique index on license_key, read in its order from the range's start.
    const range = sql.inRange('l.license_key', key.range);
    const found = await upTo(db, `${LICENSE_SELECT} WHERE ${range.sql} ORDER BY l.license_key`, range.params, group.room);
    group.add(found.rows, found.more, toItem('key_prefix'));
  }
  return group.done();
}

async function findCustomers(db: Queryable, sql: SearchSql, query: string, id: string | undefined, limit: number): Promise<SearchGroup<CustomerMatch>> {
  const group = new GroupBuilder<CustomerMatch>(limit);
  const needle = query.toLowerCase();
  const toItem = (row: Row): CustomerMatch => {
    const name = String(row.name);
    const email = row.email === null || row.email === undefined ? null : String(row.email);
    return { id: String(row.id), name, email, active: asBool(row.active), matched: id !== undefined && String(row.id) === id ? 'id' : matchedField(name, email, needle) };
  };
  if (id) {
    const found = await upTo(db, 'SELECT c.id, c.name, c.email, c.active FROM customers c WHERE c.id = ?', [id], limit);
    group.add(found.rows, found.more, toItem);
  }
  // An id or a whole license key is no one's name: its 30-odd trigrams, many of them digits
  // that names are full of, would cost a trigram search ten times a usual query's.
  const key = keyQuery(query);
  if (id !== undefined || (key !== undefined && 'whole' in key)) return group.done();
  if ([...query].length >= SUBSTRING_MIN_LENGTH) {
    const found = sql.engine === 'sqlite'
      // A phrase of the FTS5 trigram table: its trigrams in a row, i.e. the substring; inside
      // the double quotes nothing is syntax but a double quote, written twice.
      ? await upTo(db, `SELECT c.id, c.name, c.email, c.active FROM customer_search s JOIN customers c ON c.id = s.customer_id
          WHERE customer_search MATCH ?`, [`{name email} : "${query.replace(/"/g, '""')}"`], group.room)
      : await upTo(db, `SELECT c.id, c.name, c.email, c.active FROM customers c
          WHERE c.name ILIKE ? ESCAPE '\\' OR c.email ILIKE ? ESCAPE '\\'`, [likeAnywhere(query), likeAnywhere(query)], group.room);
    group.add(found.rows, found.more, toItem);
  } else {
    const range = prefixRange(needle);
    const byName = sql.inRange(sql.folded('c.name'), range);
    const byEmail = sql.inRange(sql.folded('c.email'), range);
    const found = await upTo(db, `SELECT c.id, c.name, c.email, c.active FROM customers c WHERE ${byName.sql} OR ${byEmail.sql}`,
      [...byName.params, ...byEmail.params], group.room);
    group.add(found.rows, found.more, toItem);
  }
  return group.done();
}

/** Which field a customer was found by (name before email when both hold the text). */
function matchedField(name: string, email: string | null, needle: string): MatchedBy {
  return name.toLowerCase().includes(needle) ? 'name' : email !== null && email.toLowerCase().includes(needle) ? 'email' : 'name';
}

/** A LIKE pattern for `text` anywhere, its own %, _ and \ taken literally. */
export function likeAnywhere(text: string): string {
  return `%${text.replace(/[\\%_]/g, (char) => `\\${char}`)}%`;
}

async function findMachines(db: Queryable, sql: SearchSql, query: string, id: string | undefined, limit: number): Promise<SearchGroup<MachineMatch>> {
  const group = new GroupBuilder<MachineMatch>(limit);
  const select = 'SELECT m.id, m.hardware_id, m.name, m.license_id, m.active FROM machines m';
  const toItem = (matched: MatchedBy | ((row: Row) => MatchedBy)) => (row: Row): MachineMatch => ({
    id: String(row.id),
    hardware_id: String(row.hardware_id),
    name: row.name === null || row.name === undefined ? null : String(row.name),
    license_id: String(row.license_id),
    active: asBool(row.active),
    matched: typeof matched === 'function' ? matched(row) : matched,
  });
  if (id) {
    const found = await upTo(db, `${select} WHERE m.id = ?`, [id], limit);
    group.add(found.rows, found.more, toItem('id'));
  }
  const byHardware = sql.inRange(sql.bytes('m.hardware_id'), prefixRange(query));
  const byName = sql.inRange(sql.folded('m.name'), prefixRange(query.toLowerCase()));
  const found = await upTo(db, `${select} WHERE ${byHardware.sql} OR ${byName.sql}`, [...byHardware.params, ...byName.params], group.room);
  group.add(found.rows, found.more, toItem((row) => (String(row.hardware_id).startsWith(query) ? 'hardware_id' : 'name')));
  return group.done();
}

async function findEntitlements(db: Queryable, query: string, id: string | undefined, limit: number): Promise<SearchGroup<EntitlementMatch>> {
  const group = new GroupBuilder<EntitlementMatch>(limit);
  const toItem = (matched: MatchedBy) => (row: Row): EntitlementMatch => ({ id: String(row.id), code: String(row.code), name: String(row.name), matched });
  if (id) {
    const found = await upTo(db, 'SELECT id, code, name FROM entitlements WHERE id = ?', [id], limit);
    group.add(found.rows, found.more, toItem('id'));
  }
  // Codes are compared in code point order on both engines (their column says so: migrations.ts).
  const range = prefixRange(query);
  const found = range.to === undefined
    ? await upTo(db, 'SELECT id, code, name FROM entitlements WHERE code >= ? ORDER BY code', [range.from], group.room)
    : await upTo(db, 'SELECT id, code, name FROM entitlements WHERE code >= ? AND code < ? ORDER BY code', [range.from, range.to], group.room);
  group.add(found.rows, found.more, toItem('code'));
  return group.done();
}

async function findAdminTokens(db: Queryable, id: string | undefined, limit: number): Promise<SearchGroup<AdminTokenMatch>> {
  const group = new GroupBuilder<AdminTokenMatch>(limit);
  if (!id) return group.done();
  const found = await upTo(db, 'SELECT id, name, scopes, expires_at, revoked_at FROM admin_tokens WHERE id = ?', [id], limit);
  group.add(found.rows, found.more, (row) => ({
    id: String(row.id),
    name: String(row.name),
    scopes: String(row.scopes).split(' ').filter(Boolean),
    expires_at: asIsoOrNull(row.expires_at),
    revoked: row.revoked_at !== null && row.revoked_at !== undefined,
    matched: 'id',
  }));
  return group.done();
}

/** The largest audit number looked up; more digits are no entry of ours (and past bigint). */
const MAX_AUDIT_ID = Number.MAX_SAFE_INTEGER;

async function findAuditEntries(db: Queryable, query: string, id: string | undefined, limit: number): Promise<SearchGroup<AuditEntryMatch>> {
  const group = new GroupBuilder<AuditEntryMatch>(limit);
  const select = 'SELECT id, occurred_at, actor, action, entity_type, entity_id FROM audit_log';
  const toItem = (matched: MatchedBy) => (row: Row): AuditEntryMatch => ({
    id: Number(row.id),
    occurred_at: asIso(row.occurred_at),
    actor: String(row.actor),
    action: String(row.action),
    entity_type: String(row.entity_type),
    entity_id: row.entity_id === null || row.entity_id === undefined ? null : String(row.entity_id),
    matched,
  });
  if (/^\d{1,16}$/.test(query) && Number(query) <= MAX_AUDIT_ID) {
    const found = await upTo(db, `${select} WHERE id = ?`, [Number(query)], limit);
    group.add(found.rows, found.more, toItem('id'));
  }
  if (id) {
    // Newest first: audit_log_entity_id_occurred read backwards.
    const found = await upTo(db, `${select} WHERE entity_id = ? ORDER BY occurred_at DESC, id DESC`, [id], group.room);
    group.add(found.rows, found.more, toItem('entity_id'));
  }
  return group.done();
}

async function findDeliveries(db: Queryable, id: string | undefined, limit: number): Promise<SearchGroup<DeliveryMatch>> {
  const group = new GroupBuilder<DeliveryMatch>(limit);
  if (!id) return group.done();
  const found = await upTo(db, 'SELECT id, event, channel, status, created_at FROM notification_deliveries WHERE id = ?', [id], limit);
  group.add(found.rows, found.more, (row) => ({
    id: String(row.id),
    event: String(row.event),
    channel: String(row.channel),
    status: String(row.status),
    created_at: asIso(row.created_at),
    matched: 'id',
  }));
  return group.done();
}
