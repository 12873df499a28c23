// Stores of realistic size for the scale bench (bench/scale.mjs) and for suite tests that
// need a big store (issue 24). Build first: this imports dist/.
//
//   import { buildScaleStore } from '../bench/lib/scale-store.mjs';   // (a test: '../../bench/lib/scale-store.mjs')
//   const store = await buildScaleStore({ size: 'M' });                             // SQLite
//   const store = await buildScaleStore({ size: 'M', postgres: 'postgres://postgres@127.0.0.1:5432/postgres' });
//   // run `serve` or a command with { ...process.env, ...store.env }; then
//   await store.dispose();
//
// Options:
//   size      'S' | 'M' | 'L', or counts { customers, licenses, machines, audit }.
//             S = 1k customers, 10k licenses, 10k machines, 100k audit rows; M = 10x; L = 100x.
//   postgres  a PostgreSQL server URL (any database on it, used only to connect): the store is
//             the database `license_scale_<size>_<fingerprint>` on that server, its meta in the
//             database's comment; built under a name of its own and renamed into place.
//             Without it the store is a SQLite file.
//   storeDir  where cached stores live (default bench/.stores, or env LICENSE_SCALE_STORE_DIR);
//             one directory per store: <engine>-<size>/ with meta.json (and data/ for SQLite).
//   copy      true (default): the caller gets a working copy (a SQLite file in a temporary
//             directory, or a PostgreSQL database cloned from the cached one by TEMPLATE), so
//             whatever a run writes never reaches the cache; dispose() deletes it.
//             false: the caller works on the cached store itself (it drifts as runs write).
//   workDir   where working copies go (default the OS temporary directory).
//   cache     false: no cache at all (for tests): the store is built for this call alone, in a new
//             directory and, on PostgreSQL, a database of this process's own; dispose() drops
//             both. storeDir and copy are then ignored.
//   log       a function for progress lines (default: none).
//   sampleSize how many licenses the sample spreads over (default 1000; fewer at small counts).
//   (databaseUrl is accepted as another name for postgres.)
// Two processes must not generate the same store at once (nothing locks the cache); using a
// cached store from several processes at once is fine, each with its own copy.
//
// Returns {
//   engine: 'sqlite' | 'postgres', size, counts,
//   dataDir,       the directory to give as LICENSE_DATA_DIR (the SQLite file is in it)
//   databaseUrl,   the SQLite file path or the postgres:// URL
//   env,           { LICENSE_DATA_DIR, LICENSE_DATABASE_URL }: what `serve` and every command need
//   adminToken,    an admin token (scope admin) stored in the store: `Authorization: Bearer ...`
//   sample: {      deterministic, the same on both engines, read from nothing but the formulas:
//     licenseIds, licenseKeys, customerIds, hardwareIds (licenseKeys[i] with hardwareIds[i] is
//     a machine already on that license, active, on a license that is active, valid and has no
//     machine limit: a validation of the pair is the customers' everyday request),
//     machineIds (the machines of hardwareIds), auditEntityIds (licenses with audit rows) },
//   reused,        whether the cached store was used as it was
//   loadSeconds,   how long generating the cached store took (when it was generated)
//   phases,        seconds per table, for the index rebuild and for the final vacuum/checkpoint
//   dispose(),     deletes the working copy (a no-op with copy: false; with cache: false, the store)
// }
//
// How a store is made: the real CLI creates it (`init`: migrations and the signing key;
// `token create`: the admin token), then rows go in straight through the driver, with every
// column valid under the schema's checks and in the forms the app writes (ISO timestamps to
// the millisecond, keys in the license-key format, uuids). Ids are md5(kind:i) as a uuid, so
// both engines hold the same ids and keys. For speed the tables' secondary indexes are
// dropped first (their DDL read back from sqlite_master / pg_indexes) and rebuilt after the
// load. SQLite loads with prepared statements in 200k-row
// transactions, synchronous=OFF and foreign_keys=OFF, and is checkpointed and left in WAL mode
// as the app expects; PostgreSQL loads server-side with INSERT ... SELECT FROM
// generate_series, with foreign-key triggers off for the session (the rows are consistent by
// construction), then VACUUM ANALYZE (what autovacuum does to a real store) and CHECKPOINT.
// SQLite stores are not analyzed: the app never runs ANALYZE, so a real store has no
// statistics, and the bench must plan queries as it does.
//
// A cached store is reused while its fingerprint matches: the migrations' text (dist's
// MIGRATIONS, so a new migration or index means a new store), this generator's version and
// the counts. A store whose fingerprint differs is regenerated in place.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MIGRATIONS, SCHEMA_VERSION } from '../../dist/lib/storage/migrations.js';
import { loadSqliteDriver } from '../../dist/lib/storage/sqlite-driver.js';

const require = createRequire(import.meta.url);
const CLI = fileURLToPath(new URL('../../bin/run.js', import.meta.url));
const DEFAULT_STORE_DIR = fileURLToPath(new URL('../.stores', import.meta.url));
/** Bump when the rows generated change, so that cached stores are regenerated. */
const GENERATOR_VERSION = 2;

export const SIZES = {
  S: { customers: 1_000, licenses: 10_000, machines: 10_000, audit: 100_000 },
  M: { customers: 10_000, licenses: 100_000, machines: 100_000, audit: 1_000_000 },
  L: { customers: 100_000, licenses: 1_000_000, machines: 1_000_000, audit: 10_000_000 },
};

const DAY = 86_400_000;
/** Licenses are created over three years up to T_END; customers in the year before. */
const T0 = Date.parse('2023-11-01T00:00:00.000Z');
const T_END = Date.parse('2026-11-01T00:00:00.000Z');
const SPAN = T_END - T0;
const CUSTOMER_SPAN = 365 * DAY;
const MACHINE_SPAN = SPAN - 90 * DAY; // a machine's last_seen is at most 90 days after its first
const TYPES = ['time_based', 'usage_based', 'hybrid'];
const ENTITLEMENTS = ['export', 'seats', 'sso', 'api-calls', 'reports'];
export const COMPANIES = ['Acme Tools', 'Northwind Traders', 'Globex', 'Initech', 'Umbrella Labs', 'Stark Industries', 'Wayne Enterprises', 'Hooli'];
const TABLES = ['customers', 'entitlements', 'licenses', 'license_entitlements', 'machines', 'usage_records', 'audit_log'];
const SAMPLE_SIZE = 1000;

// The rules every row follows, in one place: both engines' loaders implement exactly these.
export const rules = {
  customerActive: (c) => c % 50 !== 11,
  licenseActive: (i) => i % 20 !== 7,
  licenseExpired: (i) => i % 10 === 3,
  licenseLimited: (i) => i % 4 === 1, // max_machines 10
  licenseFloating: (i) => i % 20 === 1, // a subset of the limited ones, 24-hour leases
  licenseHasKey: (i) => i % 3 === 0, // a decryption key
  machineActive: (m) => m % 25 !== 0,
};

const md5 = (text) => createHash('md5').update(text).digest('hex');
const asUuid = (hex) => `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20, 32)}`;
export const idOf = (kind, i) => asUuid(md5(`${kind}:${i}`));
/** The license-key format (license-key.ts): 7 groups of 4 Crockford symbols; hex digits are all in its alphabet. */
export const licenseKeyOf = (i) => md5(`key:${i}`).slice(0, 28).toUpperCase().match(/.{4}/g).join('-');
export const hardwareIdOf = (m) => `hw-${md5(`hw:${m}`).slice(0, 24)}`;
export const licenseOfMachine = (m, licenses) => parseInt(md5(`machine-license:${m}`).slice(0, 8), 16) % licenses;

function resolveCounts(size) {
  if (typeof size === 'string') {
    const counts = SIZES[size.toUpperCase()];
    if (!counts) throw new Error(`unknown size ${size}: S, M or L`);
    return { label: size.toUpperCase(), counts };
  }
  const counts = { ...size };
  for (const name of ['customers', 'licenses', 'machines', 'audit']) {
    if (!Number.isSafeInteger(counts[name]) || counts[name] < 1) throw new Error(`counts.${name} must be a positive integer`);
  }
  return { label: `c${counts.customers}-l${counts.licenses}-m${counts.machines}-a${counts.audit}`, counts };
}

function fingerprintOf(counts) {
  return createHash('sha256').update(JSON.stringify({ MIGRATIONS, GENERATOR_VERSION, counts })).digest('hex').slice(0, 16);
}

/** The sample a bench or test uses; computed from the rules, so it needs no query. */
export function sampleOf(counts, size = SAMPLE_SIZE) {
  const pairs = [];
  const taken = new Set();
  const stride = Math.max(1, Math.floor(counts.machines / (size * 3)));
  for (let m = 1; m < counts.machines && pairs.length < size; m += stride) {
    const i = licenseOfMachine(m, counts.licenses);
    if (!rules.machineActive(m) || !rules.licenseActive(i) || rules.licenseExpired(i) || rules.licenseLimited(i)) continue;
    if (!rules.customerActive(i % counts.customers)) continue;
    if (taken.has(i)) continue;
    taken.add(i);
    pairs.push({ i, m });
  }
  const customers = Array.from({ length: Math.min(size, counts.customers) }, (_, k) => Math.floor((k * counts.customers) / Math.min(size, counts.customers)));
  return {
    licenseIds: pairs.map(({ i }) => idOf('license', i)),
    licenseKeys: pairs.map(({ i }) => licenseKeyOf(i)),
    hardwareIds: pairs.map(({ m }) => hardwareIdOf(m)),
    machineIds: pairs.map(({ m }) => idOf('machine', m)),
    customerIds: customers.map((c) => idOf('customer', c)),
    auditEntityIds: pairs.map(({ i }) => idOf('license', i)),
  };
}

function cliEnv(env) {
  const clean = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
  return { ...clean, ...env };
}

function runCli(args, env) {
  return execFileSync(process.execPath, [CLI, ...args], { env: cliEnv(env), encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function withDatabaseName(url, name) {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

async function pgClient(url) {
  const pg = require('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  return client;
}

export async function buildScaleStore(options) {
  const { label, counts } = resolveCounts(options.size ?? 'S');
  const engine = options.postgres || options.databaseUrl ? 'postgres' : 'sqlite';
  const serverUrl = options.postgres ?? options.databaseUrl;
  // cache: false (tests): a store of this call's own, in a new directory and (PostgreSQL) a
  // database named after this process, which dispose() removes whole: a test run makes and
  // drops its own databases and leaves no GBs behind.
  const ephemeral = options.cache === false;
  const storeDir = ephemeral
    ? mkdtempSync(path.join(options.workDir ?? tmpdir(), 'license-scale-store-'))
    : (options.storeDir ?? process.env.LICENSE_SCALE_STORE_DIR ?? DEFAULT_STORE_DIR);
  const log = options.log ?? (() => undefined);
  const copy = !ephemeral && options.copy !== false;
  const home = path.join(storeDir, `${engine}-${label}`);
  const metaFile = path.join(home, 'meta.json');
  const fingerprint = fingerprintOf(counts);
  // The fingerprint is in the name: worktrees with other migrations share the server, never a store.
  const dbName = `license_scale_${SIZES[label] ? label.toLowerCase() : 'custom'}_${fingerprint.slice(0, 8)}${ephemeral ? `_t${process.pid}_${Date.now() % 100000}` : ''}`;
  const cachedUrl = engine === 'sqlite' ? path.join(home, 'data', 'license-server.db') : withDatabaseName(serverUrl, dbName);

  let meta;
  if (engine === 'sqlite') {
    meta = existsSync(metaFile) ? JSON.parse(readFileSync(metaFile, 'utf8')) : undefined;
    if (meta?.fingerprint !== fingerprint || !sqliteStoreIsThere(cachedUrl, counts)) meta = undefined;
  } else {
    meta = await publishedMeta(serverUrl, dbName, fingerprint);
  }
  const reused = meta !== undefined;
  if (!reused) {
    log(`scale store ${engine}-${label}: generating (${counts.customers} customers, ${counts.licenses} licenses, ${counts.machines} machines, ${counts.audit} audit rows)`);
    rmSync(home, { recursive: true, force: true });
    mkdirSync(home, { recursive: true });
    const started = Date.now();
    // PostgreSQL: built under a name of this process's own, then renamed into place with its
    // meta as the database's comment, so that processes building at once never clobber each
    // other and a half-built store is never taken for a cached one.
    const building = `${dbName}_building_${process.pid}`;
    const targetUrl = engine === 'sqlite' ? cachedUrl : withDatabaseName(serverUrl, building);
    const env = { LICENSE_DATA_DIR: path.join(home, 'data'), LICENSE_DATABASE_URL: targetUrl };
    if (engine === 'postgres') {
      const admin = await pgClient(serverUrl);
      try {
        await admin.query(`DROP DATABASE IF EXISTS ${building} WITH (FORCE)`);
        await admin.query(`CREATE DATABASE ${building}`);
      } finally {
        await admin.end();
      }
    }
    runCli(['init', '--json'], env);
    const adminToken = JSON.parse(runCli(['token', 'create', '--name', 'scale-bench', '--json'], env)).token;
    const phases = engine === 'sqlite' ? await loadSqlite(targetUrl, counts, log) : await loadPostgres(targetUrl, counts, log);
    const loadSeconds = (Date.now() - started) / 1000;
    meta = { fingerprint, schemaVersion: SCHEMA_VERSION, engine, label, counts, adminToken, loadSeconds, phases, databaseName: engine === 'postgres' ? dbName : undefined };
    if (engine === 'postgres') meta = await publish(serverUrl, building, dbName, meta);
    writeFileSync(metaFile, `${JSON.stringify(meta, null, 2)}\n`, { mode: 0o600 });
    log(`scale store ${engine}-${label}: generated in ${loadSeconds.toFixed(1)} s (${Object.entries(phases).map(([k, v]) => `${k} ${v.toFixed(1)} s`).join(', ')})`);
  }

  let dataDir = path.join(home, 'data');
  let databaseUrl = cachedUrl;
  let dispose = async () => undefined;
  if (ephemeral) {
    dispose = async () => {
      if (engine === 'postgres') await dropDatabase(serverUrl, dbName);
      rmSync(storeDir, { recursive: true, force: true });
    };
  } else if (copy) {
    if (engine === 'sqlite') {
      const work = mkdtempSync(path.join(options.workDir ?? tmpdir(), `license-scale-${label}-`));
      dataDir = path.join(work, 'data');
      mkdirSync(dataDir, { mode: 0o700 });
      databaseUrl = path.join(dataDir, 'license-server.db');
      copyFileSync(cachedUrl, databaseUrl);
      dispose = async () => rmSync(work, { recursive: true, force: true });
    } else {
      const workName = `${dbName}_work_${process.pid}_${Date.now() % 100000}`;
      const admin = await pgClient(serverUrl);
      try {
        // FILE_COPY: a file-level copy, much faster than PostgreSQL 15's default WAL_LOG for GBs.
        await admin.query(`CREATE DATABASE ${workName} TEMPLATE ${dbName} STRATEGY FILE_COPY`);
      } finally {
        await admin.end();
      }
      databaseUrl = withDatabaseName(serverUrl, workName);
      dataDir = mkdtempSync(path.join(options.workDir ?? tmpdir(), `license-scale-${label}-`));
      const dir = dataDir;
      dispose = async () => {
        await dropDatabase(serverUrl, workName);
        rmSync(dir, { recursive: true, force: true });
      };
    }
  }
  return {
    engine,
    size: label,
    counts,
    dataDir,
    databaseUrl,
    env: { LICENSE_DATA_DIR: dataDir, LICENSE_DATABASE_URL: databaseUrl },
    adminToken: meta.adminToken,
    sample: sampleOf(counts, options.sampleSize),
    reused,
    loadSeconds: meta.loadSeconds,
    phases: meta.phases,
    dispose,
  };
}

async function dropDatabase(serverUrl, name) {
  const client = await pgClient(serverUrl);
  try {
    await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
  } finally {
    await client.end();
  }
}

/** Whether the cached SQLite file is really there with its rows. */
function sqliteStoreIsThere(file, counts) {
  if (!existsSync(file)) return false;
  try {
    const Database = loadSqliteDriver();
    const db = new Database(file, { readonly: true });
    try {
      return db.prepare('SELECT max(rowid) AS n FROM licenses').get().n === counts.licenses
        && db.prepare('SELECT max(version) AS v FROM schema_migrations').get().v === SCHEMA_VERSION;
    } finally {
      db.close();
    }
  } catch {
    return false;
  }
}

/** The meta of a published PostgreSQL store (its database's comment), when it is there and current. */
async function publishedMeta(serverUrl, dbName, fingerprint) {
  const admin = await pgClient(serverUrl);
  try {
    const { rows } = await admin.query("SELECT shobj_description(oid, 'pg_database') AS meta FROM pg_database WHERE datname = $1", [dbName]);
    const meta = rows[0]?.meta ? JSON.parse(rows[0].meta) : undefined;
    return meta?.fingerprint === fingerprint ? meta : undefined;
  } finally {
    await admin.end();
  }
}

/** Renames a built store into place; when another process published it first, uses that one. */
async function publish(serverUrl, building, dbName, meta) {
  const admin = await pgClient(serverUrl);
  try {
    await admin.query(`COMMENT ON DATABASE ${building} IS ${pgLiteral(JSON.stringify(meta))}`);
    try {
      await admin.query(`ALTER DATABASE ${building} RENAME TO ${dbName}`);
      return meta;
    } catch (error) {
      if (error.code !== '42P04') throw error; // duplicate_database: another process won
      await admin.query(`DROP DATABASE ${building} WITH (FORCE)`);
      const { rows } = await admin.query("SELECT shobj_description(oid, 'pg_database') AS meta FROM pg_database WHERE datname = $1", [dbName]);
      return JSON.parse(rows[0].meta);
    }
  } finally {
    await admin.end();
  }
}

const pgLiteral = (text) => `'${text.replace(/'/g, "''")}'`;

// ---------------------------------------------------------------------------------- SQLite

const iso = (ms) => new Date(ms).toISOString();
const seconds = (ms) => Math.floor(ms / 1000) * 1000;
const customerCreated = (c, counts) => T0 - CUSTOMER_SPAN + Math.floor((c * CUSTOMER_SPAN) / counts.customers);
const licenseCreated = (i, counts) => T0 + Math.floor((i * SPAN) / counts.licenses);
const machineFirstSeen = (m, counts) => T0 + Math.floor((m * MACHINE_SPAN) / counts.machines);
const auditAt = (j, counts) => T0 + Math.floor((j * SPAN) / counts.audit);
/** Spreads audit rows over entities: a multiplicative hash of the row number (cheap, and SQL can do it too). */
const spread = (j, n) => Number((BigInt(j) * 2654435761n) % BigInt(n));

function auditRow(j, counts) {
  const at = iso(auditAt(j, counts));
  const kind = j % 20;
  const actor = j % 3 === 0 ? 'cli:operator' : 'token:crm-sync';
  if (kind < 8) {
    const i = spread(j, counts.licenses);
    return [at, actor, 'license.checked_out', 'license', idOf('license', i), JSON.stringify({ ttl_days: 30, valid_until: iso(auditAt(j, counts) + 30 * DAY), hardware_id: hardwareIdOf(j % counts.machines), encrypted_key: rules.licenseHasKey(i) })];
  }
  if (kind < 11) {
    const m = spread(j, counts.machines);
    return [at, 'client:10.0.0.' + (j % 250), 'machine.activated', 'machine', idOf('machine', m), JSON.stringify({ license_id: idOf('license', licenseOfMachine(m, counts.licenses)), hardware_id: hardwareIdOf(m), name: m % 3 === 0 ? `host-${m}` : null })];
  }
  if (kind < 14) {
    const i = spread(j, counts.licenses);
    return [at, actor, 'license.updated', 'license', idOf('license', i), JSON.stringify({ changes: { max_machines: { before: null, after: 5 }, 'metadata.crm': { before: null, after: `ACC-${i}` } } })];
  }
  if (kind < 16) {
    const i = spread(j, counts.licenses);
    return [at, actor, 'license.created', 'license', idOf('license', i), JSON.stringify({
      key_prefix: licenseKeyOf(i).slice(0, 8), customer_id: idOf('customer', i % counts.customers), type: TYPES[i % 3],
      valid_from: at, valid_until: iso(auditAt(j, counts) + 3650 * DAY), entitlements: [{ code: 'export', usage_limit: null }],
      has_decryption_key: rules.licenseHasKey(i), max_machines: null, floating: false,
    })];
  }
  if (kind < 18) {
    const c = spread(j, counts.customers);
    return [at, actor, 'customer.created', 'customer', idOf('customer', c), JSON.stringify({ name: `${COMPANIES[c % COMPANIES.length]} ${c}` })];
  }
  const m = spread(j, counts.machines);
  return [at, actor, 'machine.deactivated', 'machine', idOf('machine', m), JSON.stringify({ license_id: idOf('license', licenseOfMachine(m, counts.licenses)), hardware_id: hardwareIdOf(m) })];
}

/** The rows of every table, as generators of parameter arrays, in load order (parents first). */
function sqliteRows(counts) {
  function* customers() {
    for (let c = 0; c < counts.customers; c += 1) {
      const at = iso(customerCreated(c, counts));
      yield [idOf('customer', c), `${COMPANIES[c % COMPANIES.length]} ${c}`, rules.customerActive(c) ? 1 : 0, at, at];
    }
  }
  function* entitlements() {
    for (let e = 0; e < ENTITLEMENTS.length; e += 1) yield [idOf('entitlement', e), ENTITLEMENTS[e], `${ENTITLEMENTS[e]} feature`, iso(T0 - CUSTOMER_SPAN)];
  }
  function* licenses() {
    for (let i = 0; i < counts.licenses; i += 1) {
      const created = licenseCreated(i, counts);
      const from = seconds(created);
      const until = from + (rules.licenseExpired(i) ? 30 : 3650) * DAY;
      yield [
        idOf('license', i), licenseKeyOf(i), idOf('customer', i % counts.customers), TYPES[i % 3], rules.licenseActive(i) ? 1 : 0,
        iso(from), iso(until), rules.licenseHasKey(i) ? createHash('sha256').update(`dk:${i}`).digest() : null,
        rules.licenseLimited(i) ? 10 : null, rules.licenseFloating(i) ? 1 : 0, rules.licenseFloating(i) ? 24 : 1,
        i % 5 === 0 ? JSON.stringify({ crm: `ACC-${String(i).padStart(7, '0')}` }) : '{}', iso(created), iso(created),
      ];
    }
  }
  function* grants() {
    for (let i = 0; i < counts.licenses; i += 1) {
      yield [idOf('license', i), idOf('entitlement', 0), null, 0];
      yield [idOf('license', i), idOf('entitlement', 1 + (i % 4)), i % 2 === 0 ? 1000 : null, i % 2 === 0 ? 1 + (i % 7) : 0];
    }
  }
  function* machines() {
    for (let m = 0; m < counts.machines; m += 1) {
      const i = licenseOfMachine(m, counts.licenses);
      const first = machineFirstSeen(m, counts);
      const last = first + (m % 90) * DAY;
      const active = rules.machineActive(m);
      yield [
        idOf('machine', m), idOf('license', i), hardwareIdOf(m), m % 3 === 0 ? `host-${m}` : null, `1.${m % 10}.${m % 7}`, active ? 1 : 0,
        iso(first), iso(last), rules.licenseFloating(i) ? iso(last + DAY) : null, null, active ? null : iso(last),
      ];
    }
  }
  function* usage() {
    for (let i = 0; i < counts.licenses; i += 2) {
      const at = iso(licenseCreated(i, counts) + DAY);
      const quantity = 1 + (i % 7);
      yield [idOf('usage', i), idOf('license', i), idOf('entitlement', 1 + (i % 4)), `import-${i}`, `hw-usage-${i}`, quantity, 1000 - quantity, at, at];
    }
  }
  function* audit() {
    for (let j = 0; j < counts.audit; j += 1) yield auditRow(j, counts);
  }
  return [
    ['customers', 'id, name, active, created_at, updated_at', customers],
    ['entitlements', 'id, code, name, created_at', entitlements],
    ['licenses', 'id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key, max_machines, floating, lease_hours, metadata, created_at, updated_at', licenses],
    ['license_entitlements', 'license_id, entitlement_id, usage_limit, used', grants],
    ['machines', 'id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, lease_expires_at, offline_until, deactivated_at', machines],
    ['usage_records', 'id, license_id, entitlement_id, idempotency_key, hardware_id, quantity, remaining, occurred_at, recorded_at', usage],
    ['audit_log', 'occurred_at, actor, action, entity_type, entity_id, details', audit],
  ];
}

async function loadSqlite(file, counts, log) {
  const phases = {};
  const Database = loadSqliteDriver();
  const db = new Database(file);
  try {
    db.pragma('synchronous = OFF');
    db.pragma('foreign_keys = OFF');
    db.pragma('cache_size = -262144'); // 256 MiB for the index rebuilds
    let started = Date.now();
    const indexes = db.prepare(`SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL AND tbl_name IN (${TABLES.map(() => '?').join(', ')})`).all(...TABLES);
    for (const { name } of indexes) db.exec(`DROP INDEX ${name}`);
    for (const [table, columns, rows] of sqliteRows(counts)) {
      const insert = db.prepare(`INSERT INTO ${table} (${columns}) VALUES (${columns.split(',').map(() => '?').join(', ')})`);
      const batch = db.transaction((items) => {
        for (const item of items) insert.run(item);
      });
      let items = [];
      for (const row of rows()) {
        items.push(row);
        if (items.length === 200_000) {
          batch(items);
          items = [];
        }
      }
      batch(items);
      phases[table] = (Date.now() - started) / 1000;
      log(`  ${table}: ${phases[table].toFixed(1)} s`);
      started = Date.now();
    }
    for (const { sql } of indexes) db.exec(sql);
    // No ANALYZE: license-server never analyzes a SQLite store, and with sqlite_stat1 the
    // planner would pick plans no real store gets (a skip-scan made `audit list --entity-id`
    // at L take 187 ms where an unanalyzed store takes seconds).
    phases.indexes = (Date.now() - started) / 1000;
    started = Date.now();
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.pragma('journal_mode = WAL');
    phases.checkpoint = (Date.now() - started) / 1000;
  } finally {
    db.close();
  }
  return phases;
}

// ------------------------------------------------------------------------------ PostgreSQL

/** The same rows as sqliteRows, generated by the server. `ts(expr_ms)` is a timestamptz from epoch milliseconds. */
function postgresStatements(counts) {
  const uuid = (kind, expr) => `md5('${kind}:' || (${expr}))::uuid`;
  // Whole seconds plus whole milliseconds: exact, where a float division could land a microsecond short.
  const ts = (ms) => `(to_timestamp(floor((${ms})::numeric / 1000)) + (((${ms})::numeric % 1000)::int) * interval '1 millisecond')`;
  const key = (expr) => `regexp_replace(upper(substr(md5('key:' || (${expr})), 1, 28)), '(....)(?=.)', '\\1-', 'g')`;
  const hw = (expr) => `'hw-' || substr(md5('hw:' || (${expr})), 1, 24)`;
  const licenseOf = (expr) => `(('x' || substr(md5('machine-license:' || (${expr})), 1, 8))::bit(32)::bigint % ${counts.licenses})`;
  const spread = (expr, n) => `((${expr})::numeric * 2654435761 % ${n})::bigint`;
  const companies = `(ARRAY[${COMPANIES.map((name) => `'${name}'`).join(', ')}])`;
  const C = counts.customers;
  const customerAt = (c) => ts(`${T0 - CUSTOMER_SPAN} + floor((${c})::numeric * ${CUSTOMER_SPAN} / ${C})`);
  const licenseAtMs = (i) => `(${T0} + floor((${i})::numeric * ${SPAN} / ${counts.licenses}))`;
  const auditAtMs = (j) => `(${T0} + floor((${j})::numeric * ${SPAN} / ${counts.audit}))`;
  return {
    customers: `INSERT INTO customers (id, name, active, created_at, updated_at)
      SELECT ${uuid('customer', 'c')}, ${companies}[c % ${COMPANIES.length} + 1] || ' ' || c, c % 50 <> 11, ${customerAt('c')}, ${customerAt('c')}
      FROM generate_series(0, ${C - 1}) c`,
    entitlements: `INSERT INTO entitlements (id, code, name, created_at)
      SELECT ${uuid('entitlement', 'e - 1')}, code, code || ' feature', ${ts(T0 - CUSTOMER_SPAN)}
      FROM unnest(ARRAY[${ENTITLEMENTS.map((code) => `'${code}'`).join(', ')}]) WITH ORDINALITY AS t (code, e)`,
    licenses: `INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key, max_machines, floating, lease_hours, metadata, created_at, updated_at)
      SELECT ${uuid('license', 'i')}, ${key('i')}, ${uuid('customer', `i % ${C}`)}, (ARRAY['time_based', 'usage_based', 'hybrid'])[i % 3 + 1], i % 20 <> 7,
        ${ts(`floor(${licenseAtMs('i')} / 1000) * 1000`)}, ${ts(`floor(${licenseAtMs('i')} / 1000) * 1000 + CASE WHEN i % 10 = 3 THEN 30 ELSE 3650 END * ${DAY}::numeric`)},
        CASE WHEN i % 3 = 0 THEN sha256(convert_to('dk:' || i, 'UTF8')) END, CASE WHEN i % 4 = 1 THEN 10 END, i % 20 = 1, CASE WHEN i % 20 = 1 THEN 24 ELSE 1 END,
        CASE WHEN i % 5 = 0 THEN jsonb_build_object('crm', 'ACC-' || lpad(i::text, 7, '0')) ELSE '{}'::jsonb END, ${ts(licenseAtMs('i'))}, ${ts(licenseAtMs('i'))}
      FROM generate_series(0, ${counts.licenses - 1}) i`,
    license_entitlements: `INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit, used)
      SELECT ${uuid('license', 'i')}, ${uuid('entitlement', '0')}, NULL, 0 FROM generate_series(0, ${counts.licenses - 1}) i
      UNION ALL
      SELECT ${uuid('license', 'i')}, ${uuid('entitlement', '1 + i % 4')}, CASE WHEN i % 2 = 0 THEN 1000 END, CASE WHEN i % 2 = 0 THEN 1 + i % 7 ELSE 0 END
      FROM generate_series(0, ${counts.licenses - 1}) i`,
    machines: `INSERT INTO machines (id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, lease_expires_at, offline_until, deactivated_at)
      SELECT ${uuid('machine', 'm')}, ${uuid('license', 'i')}, ${hw('m')}, CASE WHEN m % 3 = 0 THEN 'host-' || m END, '1.' || m % 10 || '.' || m % 7, m % 25 <> 0,
        ${ts('first')}, ${ts('last')}, CASE WHEN i % 20 = 1 THEN ${ts(`last + ${DAY}`)} END, NULL, CASE WHEN m % 25 = 0 THEN ${ts('last')} END
      FROM (SELECT m, ${licenseOf('m')} AS i, ${T0} + floor(m::numeric * ${MACHINE_SPAN} / ${counts.machines}) AS first,
              ${T0} + floor(m::numeric * ${MACHINE_SPAN} / ${counts.machines}) + (m % 90) * ${DAY}::numeric AS last
            FROM generate_series(0, ${counts.machines - 1}) m) s`,
    usage_records: `INSERT INTO usage_records (id, license_id, entitlement_id, idempotency_key, hardware_id, quantity, remaining, occurred_at, recorded_at)
      SELECT ${uuid('usage', 'i')}, ${uuid('license', 'i')}, ${uuid('entitlement', '1 + i % 4')}, 'import-' || i, 'hw-usage-' || i, 1 + i % 7, 999 - i % 7,
        ${ts(`${licenseAtMs('i')} + ${DAY}`)}, ${ts(`${licenseAtMs('i')} + ${DAY}`)}
      FROM generate_series(0, ${counts.licenses - 1}, 2) i`,
    // One statement per kind of row (the kinds are j % 20 ranges, as in auditRow).
    audit_log: (from, to) => `INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details)
      SELECT ${ts(auditAtMs('j'))}, CASE WHEN j % 20 BETWEEN 8 AND 10 THEN 'client:10.0.0.' || j % 250 WHEN j % 3 = 0 THEN 'cli:operator' ELSE 'token:crm-sync' END,
        CASE WHEN k < 8 THEN 'license.checked_out' WHEN k < 11 THEN 'machine.activated' WHEN k < 14 THEN 'license.updated' WHEN k < 16 THEN 'license.created'
             WHEN k < 18 THEN 'customer.created' ELSE 'machine.deactivated' END,
        CASE WHEN k < 8 OR k BETWEEN 11 AND 15 THEN 'license' WHEN k BETWEEN 16 AND 17 THEN 'customer' ELSE 'machine' END,
        CASE WHEN k < 8 OR k BETWEEN 11 AND 15 THEN ${uuid('license', 'li')} WHEN k BETWEEN 16 AND 17 THEN ${uuid('customer', 'ci')} ELSE ${uuid('machine', 'mi')} END::text,
        CASE
          WHEN k < 8 THEN jsonb_build_object('ttl_days', 30, 'valid_until', to_char(${ts(`${auditAtMs('j')} + 30 * ${DAY}::numeric`)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'hardware_id', ${hw(`j % ${counts.machines}`)}, 'encrypted_key', li % 3 = 0)
          WHEN k < 11 THEN jsonb_build_object('license_id', ${uuid('license', licenseOf('mi'))}, 'hardware_id', ${hw('mi')}, 'name', CASE WHEN mi % 3 = 0 THEN 'host-' || mi END)
          WHEN k < 14 THEN jsonb_build_object('changes', jsonb_build_object('max_machines', '{"before": null, "after": 5}'::jsonb, 'metadata.crm', jsonb_build_object('before', NULL, 'after', 'ACC-' || li)))
          WHEN k < 16 THEN jsonb_build_object('key_prefix', substr(upper(md5('key:' || li)), 1, 4) || '-' || substr(upper(md5('key:' || li)), 5, 3),
            'customer_id', ${uuid('customer', `li % ${C}`)}, 'type', (ARRAY['time_based', 'usage_based', 'hybrid'])[li % 3 + 1],
            'valid_from', to_char(${ts(auditAtMs('j'))} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'valid_until', to_char(${ts(`${auditAtMs('j')} + 3650 * ${DAY}::numeric`)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'entitlements', '[{"code": "export", "usage_limit": null}]'::jsonb, 'has_decryption_key', li % 3 = 0, 'max_machines', NULL, 'floating', false)
          WHEN k < 18 THEN jsonb_build_object('name', ${companies}[ci % ${COMPANIES.length} + 1] || ' ' || ci)
          ELSE jsonb_build_object('license_id', ${uuid('license', licenseOf('mi'))}, 'hardware_id', ${hw('mi')})
        END
      FROM (SELECT j, j % 20 AS k, ${spread('j', counts.licenses)} AS li, ${spread('j', counts.machines)} AS mi, ${spread('j', C)} AS ci
            FROM generate_series(${from}, ${to - 1}) j) s
      ORDER BY j`,
  };
}

async function loadPostgres(url, counts, log) {
  const phases = {};
  const client = await pgClient(url);
  try {
    await client.query("SET session_replication_role = replica"); // no foreign-key triggers: the rows are consistent by construction
    await client.query("SET maintenance_work_mem = '512MB'");
    await client.query('SET synchronous_commit = off');
    let started = Date.now();
    const { rows: indexes } = await client.query(
      `SELECT i.indexname, i.indexdef FROM pg_indexes i
       WHERE i.schemaname = current_schema() AND i.tablename = ANY($1)
         AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = (quote_ident(i.schemaname) || '.' || quote_ident(i.indexname))::regclass)`,
      [TABLES],
    );
    for (const { indexname } of indexes) await client.query(`DROP INDEX ${indexname}`);
    const statements = postgresStatements(counts);
    for (const table of TABLES) {
      if (table === 'audit_log') {
        const chunk = 1_000_000;
        for (let j = 0; j < counts.audit; j += chunk) await client.query(statements.audit_log(j, Math.min(counts.audit, j + chunk)));
      } else {
        await client.query(statements[table]);
      }
      phases[table] = (Date.now() - started) / 1000;
      log(`  ${table}: ${phases[table].toFixed(1)} s`);
      started = Date.now();
    }
    for (const { indexdef } of indexes) await client.query(indexdef);
    phases.indexes = (Date.now() - started) / 1000;
    started = Date.now();
    await client.query('VACUUM (ANALYZE)');
    await client.query('CHECKPOINT');
    phases.vacuum = (Date.now() - started) / 1000;
  } finally {
    await client.end();
  }
  return phases;
}
