import { createHash, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { recordAudit } from './audit.js';
import { now, type OperationContext } from './context.js';
import { LicenseServerError } from './errors.js';
import type { Keyset } from './cursor.js';
import { pageQuery, fetchPage, type ListPage, type Page, type PageQuery } from './paging.js';
import { isUniqueViolation } from './storage/errors.js';
import type { Database, Queryable, Row } from './storage/types.js';
import { asIso, asIsoOrNull } from './storage/values.js';
import { describe, escapeInvisible, hasInvisibleCharacters, isUuid, requireNonEmpty } from './validate.js';

/**
 * What a token may do. `read`: lists and shows; `licenses`: create and change customers,
 * entitlements, licenses and machines, and check licenses out; `backups`: create, list,
 * download and validate backups; `restore`: restore a backup, the one operation that
 * replaces every record, so it is granted on its own; `metrics`: GET /metrics only, for a
 * Prometheus server that should be able to do nothing else; `admin`: everything, including
 * notification settings. docs/http-api.md gives each route's scope.
 */
export const SCOPES = ['read', 'licenses', 'backups', 'restore', 'metrics', 'admin'] as const;
export type Scope = (typeof SCOPES)[number];

export function parseScopes(values: readonly string[]): Scope[] {
  if (values.length === 0) throw new LicenseServerError('INVALID_SCOPE', 'a token needs at least one scope');
  const scopes = new Set<Scope>();
  for (const value of values) {
    if (!(SCOPES as readonly string[]).includes(value)) {
      throw new LicenseServerError('INVALID_SCOPE', `unknown scope ${describe(value)}; the scopes are ${SCOPES.join(', ')}`);
    }
    scopes.add(value as Scope);
  }
  return SCOPES.filter((scope) => scopes.has(scope));
}

/** Whether a token with `scopes` may use a route that needs `needed`; `admin` covers all. */
export function scopeAllows(scopes: readonly Scope[], needed: Scope): boolean {
  return scopes.includes('admin') || scopes.includes(needed);
}

export interface AdminToken {
  readonly id: string;
  readonly name: string;
  readonly scopes: readonly Scope[];
  readonly expires_at: string | null;
  /** The token's first characters, enough to recognise it in a list; never enough to use it. */
  readonly prefix: string;
  readonly created_by: string;
  readonly created_at: string;
  readonly last_used_at: string | null;
  readonly revoked_at: string | null;
}

export interface IssuedAdminToken {
  /** Shown once and stored only as its SHA-256. */
  readonly token: string;
  readonly record: AdminToken;
}

/** `lsat_` marks our tokens so secret scanners and people can recognise a leaked one. */
const TOKEN_PREFIX = 'lsat_';
const SHOWN_PREFIX_LENGTH = TOKEN_PREFIX.length + 6;
const COLUMNS = 'id, name, scopes, expires_at, token_prefix, created_by, created_at, last_used_at, revoked_at';

export interface NewAdminToken {
  readonly name: string;
  /** Default: `admin`, what every token could do before scopes existed. */
  readonly scopes?: readonly string[];
  /** From now; default: never expires. */
  readonly expiresInMs?: number;
  /**
   * The scopes of the token asking for this one (the HTTP API): a token grants no scope it
   * does not hold, so a token cannot make itself a stronger one. Absent for the command line,
   * whose user holds the database itself.
   */
  readonly grantorScopes?: readonly Scope[];
}

/**
 * A token's name, as `token:<name>` in the audit log: 1-100 characters without control
 * characters, and without invisible ones (zero-width, bidirectional controls: see
 * hasInvisibleCharacters), which would let `boot\u200bstrap` or a name turned around by
 * U+202E pass for another token's in the log.
 */
export function parseTokenName(value: string | undefined): string {
  const name = requireNonEmpty(value, 'token name', 100);
  if (hasInvisibleCharacters(name)) {
    throw new LicenseServerError('INVALID_INPUT', `token name ${describe(name)} holds invisible characters (zero-width, bidirectional controls, format characters), which would make it look like another name`);
  }
  return name;
}

/**
 * What two names are compared as: the same after Unicode compatibility normalisation (NFKC:
 * full-width letters, ligatures) and case folding are one name, so `BOOTSTRAP` or `Ｄeploy`
 * cannot stand beside `bootstrap` or `deploy` in the audit log.
 */
export function tokenNameKey(name: string): string {
  return name.normalize('NFKC').toUpperCase().toLowerCase().normalize('NFKC');
}

/**
 * Names are never reused, even after a revocation, and no two differ only by case (or by
 * what NFKC folds), so `token:<name>` in the audit log always names one token.
 */
export async function createAdminToken(db: Database, input: NewAdminToken, context: OperationContext): Promise<IssuedAdminToken> {
  const name = parseTokenName(input.name);
  const scopes = parseScopes(input.scopes ?? ['admin']);
  if (input.grantorScopes) {
    const beyond = scopes.filter((scope) => !scopeAllows(input.grantorScopes!, scope));
    if (beyond.length > 0) {
      throw new LicenseServerError('TOKEN_SCOPE', `a token grants only scopes it holds; this one does not hold ${beyond.map((scope) => `"${scope}"`).join(', ')}`);
    }
  }
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  try {
    const record = await db.transaction(async (tx) => {
      await lockTokenNames(tx, db);
      return insertToken(tx, { name, scopes, expiresInMs: input.expiresInMs }, token, context);
    });
    return { token, record };
  } catch (error) {
    if (isUniqueViolation(error)) {
      throw new LicenseServerError('TOKEN_NAME_EXISTS', `a token named ${describe(name)} exists or existed; names are never reused`);
    }
    throw error;
  }
}

async function insertToken(
  tx: Queryable,
  input: { name: string; scopes: readonly Scope[]; expiresInMs?: number | undefined },
  token: string,
  context: OperationContext,
): Promise<AdminToken> {
  const { name, scopes } = input;
  const at = now(context);
  const expiresAt = input.expiresInMs === undefined ? null : new Date(at.getTime() + input.expiresInMs).toISOString();
  const id = randomUUID();
  const taken = await takenNameKeys(tx);
  if (taken.has(tokenNameKey(name))) {
    const existing = taken.get(tokenNameKey(name))!;
    throw new LicenseServerError(
      'TOKEN_NAME_EXISTS',
      existing === name
        ? `a token named ${describe(name)} exists or existed; names are never reused`
        : `a token named ${describe(existing)} exists or existed, and names that differ only by case are one name; names are never reused`,
    );
  }
  await tx.execute(
    `INSERT INTO admin_tokens (id, name, scopes, expires_at, token_hash, token_prefix, created_by, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, name, scopes.join(' '), expiresAt, hashToken(token), token.slice(0, SHOWN_PREFIX_LENGTH), context.actor, at.toISOString()],
  );
  await recordAudit(tx, context, {
    action: 'token.created',
    entityType: 'admin_token',
    entityId: id,
    details: { name, scopes, expires_at: expiresAt },
  });
  return getToken(tx, id);
}

export const TOKEN_KEYSET: Keyset = {
  list: 'tokens',
  keys: [{ column: 'created_at', field: 'created_at', kind: 'timestamp' }, { column: 'id', field: 'id', kind: 'uuid' }],
};

/** Oldest first; the whole list when no page is asked for (callers in the core count them). */
export function tokenListQuery(options: { includeRevoked?: boolean } & Page = {}): PageQuery {
  const where = options.includeRevoked ? [] : ['revoked_at IS NULL'];
  return pageQuery(`SELECT ${COLUMNS} FROM admin_tokens`, where, [], TOKEN_KEYSET, { all: options.includeRevoked === true }, options, { whole: true });
}

export async function listAdminTokensPage(db: Queryable, options: { includeRevoked?: boolean } & Page = {}): Promise<ListPage<AdminToken>> {
  return fetchPage(db, tokenListQuery(options), toToken);
}

export async function listAdminTokens(db: Queryable, options: { includeRevoked?: boolean } & Page = {}): Promise<AdminToken[]> {
  return (await listAdminTokensPage(db, options)).items;
}

/**
 * Every name taken, live or revoked, by its comparison key. The names are few (people make
 * tokens by hand), and comparing in SQL would fold case differently on each engine (SQLite's
 * lower() knows only ASCII).
 */
async function takenNameKeys(tx: Queryable): Promise<Map<string, string>> {
  const rows = await tx.query('SELECT name FROM admin_tokens ORDER BY created_at, id');
  const taken = new Map<string, string>();
  for (const row of rows) if (!taken.has(tokenNameKey(String(row.name)))) taken.set(tokenNameKey(String(row.name)), String(row.name));
  return taken;
}

/**
 * Two creations of `Deploy` and `deploy` at the same moment must not both pass the check: on
 * PostgreSQL the check and the insert exclude other writers of admin_tokens (the unique index
 * compares exact names only); SQLite's transactions hold the write lock anyway.
 */
async function lockTokenNames(tx: Queryable, db: Database): Promise<void> {
  if (db.engine === 'postgres') await tx.query('LOCK TABLE admin_tokens IN SHARE ROW EXCLUSIVE MODE');
}

/** One token by id, revoked or not. */
export async function getAdminToken(db: Queryable, id: string): Promise<AdminToken> {
  const rows = isUuid(id) ? await db.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE id = ?`, [id.toLowerCase()]) : [];
  if (!rows[0]) throw new LicenseServerError('TOKEN_NOT_FOUND', `no token has the id ${describe(id)}`);
  return toToken(rows[0]);
}

/**
 * Revokes by id or by the name of a live token: the exact name, or else the one live name that
 * differs from it only by case. Names that clash that way can exist from before they were
 * compared so (see docs/http-api.md); for them only the exact name or the id will do.
 * Revoking twice changes nothing.
 *
 * The token whose actor is the context's (the API caller's own token) is revoked only with
 * `allowSelf`: a person revoking tokens in the console would otherwise lock themselves out
 * with one mistaken click, and with the last admin token, the API too.
 */
export async function revokeAdminToken(db: Database, reference: string, context: OperationContext, options: { allowSelf?: boolean } = {}): Promise<AdminToken> {
  return db.transaction(async (tx) => {
    let rows = isUuid(reference)
      ? await tx.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE id = ?`, [reference.toLowerCase()])
      : await tx.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE name = ? AND revoked_at IS NULL`, [reference]);
    if (!rows[0] && !isUuid(reference)) {
      const live = await tx.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE revoked_at IS NULL`);
      const alike = live.filter((row) => tokenNameKey(String(row.name)) === tokenNameKey(reference));
      if (alike.length > 1) {
        throw new LicenseServerError('TOKEN_NOT_FOUND', `${alike.length} live tokens have names that differ from ${describe(reference)} only by case; revoke one by its exact name or its id`);
      }
      rows = alike;
    }
    if (!rows[0]) throw new LicenseServerError('TOKEN_NOT_FOUND', `no live token has the id or name ${describe(reference)}`);
    const token = toToken(rows[0]);
    if (token.revoked_at) return token;
    if (context.actor === `token:${token.name}` && !options.allowSelf) {
      throw new LicenseServerError('TOKEN_SELF_REVOKE', `token ${describe(token.name)} is the token this request is made with; revoking it ends this session at once`);
    }
    await tx.execute('UPDATE admin_tokens SET revoked_at = ? WHERE id = ?', [now(context).toISOString(), token.id]);
    await recordAudit(tx, context, { action: 'token.revoked', entityType: 'admin_token', entityId: token.id, details: { name: token.name } });
    return getToken(tx, token.id);
  });
}

export interface AuthenticatedAdmin {
  /** `token:<name>`, the actor recorded in the audit log; `config:admin_token` for LICENSE_ADMIN_TOKEN. */
  readonly actor: string;
  readonly tokenId: string | null;
  readonly scopes: readonly Scope[];
}

/** The actor of the token configured as `admin_token`: not `token:`, so no stored token's name can collide with it. */
export const CONFIGURED_TOKEN_ACTOR = 'config:admin_token';

const LAST_USED_RESOLUTION_MS = 60_000;

/**
 * Checks a presented bearer token against the bootstrap token (LICENSE_ADMIN_TOKEN) and the
 * stored, unrevoked ones. Only SHA-256 hashes are looked up and compared (the final
 * comparisons in constant time), so the response time says nothing about how close a
 * guess came to a real token.
 */
export async function authenticateAdminToken(
  db: Database,
  presented: string,
  options: { bootstrapToken?: string | undefined; clock?: () => Date } = {},
): Promise<AuthenticatedAdmin | null> {
  if (typeof presented !== 'string' || presented.length === 0 || presented.length > 512) return null;
  const presentedHash = Buffer.from(hashToken(presented), 'hex');
  if (options.bootstrapToken && timingSafeEqual(presentedHash, Buffer.from(hashToken(options.bootstrapToken), 'hex'))) {
    return { actor: CONFIGURED_TOKEN_ACTOR, tokenId: null, scopes: ['admin'] };
  }
  const rows = await db.query('SELECT id, name, scopes, expires_at, token_hash, last_used_at FROM admin_tokens WHERE token_hash = ? AND revoked_at IS NULL', [
    presentedHash.toString('hex'),
  ]);
  const row = rows[0];
  if (!row || !timingSafeEqual(Buffer.from(String(row.token_hash), 'hex'), presentedHash)) return null;
  const at = options.clock ? options.clock() : new Date();
  const expiresAt = asIsoOrNull(row.expires_at);
  if (expiresAt !== null && Date.parse(expiresAt) <= at.getTime()) {
    throw new LicenseServerError('TOKEN_EXPIRED', `the token ${describe(String(row.name))} expired at ${expiresAt}`);
  }
  const lastUsed = row.last_used_at === null ? 0 : Date.parse(asIso(row.last_used_at));
  // A write per request would cost more than the request; a minute's resolution is enough.
  if (at.getTime() - lastUsed >= LAST_USED_RESOLUTION_MS) {
    await db.execute('UPDATE admin_tokens SET last_used_at = ? WHERE id = ?', [at.toISOString(), String(row.id)]);
  }
  return { actor: `token:${String(row.name)}`, tokenId: String(row.id), scopes: storedScopes(row.scopes) };
}

/**
 * What `token list` warns about in a store made before names were checked: names that differ
 * only by case (or by what NFKC folds), and names holding invisible characters. Such tokens
 * keep working and keep their names, as the audit log records them; new ones cannot be made.
 */
export function tokenNameWarnings(tokens: readonly AdminToken[]): string[] {
  const warnings: string[] = [];
  const byKey = new Map<string, AdminToken[]>();
  for (const token of tokens) byKey.set(tokenNameKey(token.name), [...(byKey.get(tokenNameKey(token.name)) ?? []), token]);
  for (const alike of byKey.values()) {
    if (alike.length < 2) continue;
    warnings.push(`tokens ${alike.map((token) => `"${escapeInvisible(token.name)}" (${token.id})`).join(', ')} have names that differ only by case: they were made before names were compared without case; the audit log tells them apart by the exact name`);
  }
  for (const token of tokens) {
    if (hasInvisibleCharacters(token.name)) warnings.push(`token "${escapeInvisible(token.name)}" (${token.id}) has invisible characters in its name, shown escaped; it was made before they were refused`);
  }
  return warnings;
}

/**
 * tokenNameWarnings for each of `tokens`, against every token stored (revoked ones too: the
 * audit log keeps their names), so that a page of a list, or one token, warns as the whole
 * list would. By id; a token without warnings has an empty list.
 */
export async function tokenNameWarningsById(db: Queryable, tokens: readonly AdminToken[]): Promise<Map<string, string[]>> {
  const stored = await db.query('SELECT id, name FROM admin_tokens ORDER BY created_at, id');
  const warnings = new Map<string, string[]>();
  for (const token of tokens) {
    const alike = stored.filter((row) => String(row.id) !== token.id && tokenNameKey(String(row.name)) === tokenNameKey(token.name));
    const own: string[] = [];
    if (alike.length > 0) {
      own.push(`the name differs only by case from ${alike.map((row) => `"${escapeInvisible(String(row.name))}" (${String(row.id)})`).join(', ')}: they were made before names were compared without case; the audit log tells them apart by the exact name`);
    }
    if (hasInvisibleCharacters(token.name)) own.push(`the name has invisible characters, shown escaped as "${escapeInvisible(token.name)}"; it was made before they were refused`);
    warnings.set(token.id, own);
  }
  return warnings;
}

function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}
async function getToken(db: Queryable, id: string): Promise<AdminToken> {
  const rows = await db.query(`SELECT ${COLUMNS} FROM admin_tokens WHERE id = ?`, [id]);
  return toToken(rows[0]!);
}
function storedScopes(value: unknown): Scope[] {
  return String(value).split(' ').filter((scope): scope is Scope => (SCOPES as readonly string[]).includes(scope));
}

function toToken(row: Row): AdminToken {
  return {
    id: String(row.id),
    name: String(row.name),
    scopes: storedScopes(row.scopes),
    expires_at: asIsoOrNull(row.expires_at),
    prefix: String(row.token_prefix),
    created_by: String(row.created_by),
    created_at: asIso(row.created_at),
    last_used_at: asIsoOrNull(row.last_used_at),
    revoked_at: asIsoOrNull(row.revoked_at),
  };
}

/**
 * The first admin token of a fresh installation, named "bootstrap": created only while no
 * live token exists, so it is returned (and shown) exactly once. The check and the insert
 * are one transaction that excludes other writers of admin_tokens (PostgreSQL: a table lock;
 * SQLite: the write lock every transaction holds), so of several first starts on one
 * database exactly one makes it. Names are never reused: after the first bootstrap token was
 * revoked, the next one is bootstrap-2.
 */
export async function bootstrapAdminToken(db: Database, context: OperationContext): Promise<string | undefined> {
  if ((await listAdminTokens(db)).length > 0) return undefined;
  const token = TOKEN_PREFIX + randomBytes(32).toString('base64url');
  const created = await db.transaction(async (tx) => {
    await lockTokenNames(tx, db);
    if ((await tx.query('SELECT 1 FROM admin_tokens WHERE revoked_at IS NULL')).length > 0) return false;
    // The first free name of bootstrap, bootstrap-2, bootstrap-3...: a revoked `BOOTSTRAP`
    // made by hand takes `bootstrap` too.
    const taken = await takenNameKeys(tx);
    let n = 1;
    while (taken.has(tokenNameKey(n === 1 ? 'bootstrap' : `bootstrap-${n}`))) n += 1;
    await insertToken(tx, { name: n === 1 ? 'bootstrap' : `bootstrap-${n}`, scopes: ['admin'] }, token, context);
    return true;
  });
  return created ? token : undefined;
}
