import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { scaledMs } from './busy-machine.js';

/**
 * The PostgreSQL server the tests use: LICENSE_TEST_DATABASE_URL names a database to
 * connect to for administration; every test database is created beside it and dropped
 * when the run ends.
 */
export const ADMIN_URL = process.env.LICENSE_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres';
const RUN_PREFIX = `license_test_${process.pid}_${randomBytes(3).toString('hex')}`;
let counter = 0;
let availability: Promise<string | undefined> | undefined;

/** Resolves to undefined when the server answers, or to the reason it does not. */
export function postgresProblem(): Promise<string | undefined> {
  availability ??= (async () => {
    const client = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 3000 });
    try {
      await client.connect();
      await client.query('SELECT 1');
      return undefined;
    } catch (error) {
      return (error as Error).message || String(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  })();
  return availability;
}

/**
 * Call from a `before` hook of every PostgreSQL suite. Under CI=true an unreachable server
 * fails the suite; elsewhere it skips it, loudly.
 */
export async function requirePostgres(context: Mocha.Context): Promise<void> {
  const problem = await postgresProblem();
  if (!problem) return;
  if (process.env.CI === 'true') throw new Error(`PostgreSQL is required under CI=true but ${ADMIN_URL} fails: ${problem}`);
  console.warn(`    (skipping: PostgreSQL at ${ADMIN_URL} is unreachable: ${problem})`);
  context.skip();
}

/** Runs `work` on a connection of its own to `url`, closed afterwards. */
export async function onDatabase<T>(url: string, work: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await work(client);
  } finally {
    await client.end();
  }
}

/** Creates an empty database for one suite or test and returns its URL. */
export async function createTestDatabase(): Promise<string> {
  counter += 1;
  const name = `${RUN_PREFIX}_${counter}`;
  await onDatabase(ADMIN_URL, (client) => client.query(`CREATE DATABASE ${name}`));
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

export async function dropTestDatabase(url: string): Promise<void> {
  const name = new URL(url).pathname.slice(1);
  await onDatabase(ADMIN_URL, (client) => dropDatabase(client, name));
}

/**
 * DROP DATABASE forces a checkpoint, which fails ('checkpoint request failed') while another
 * run's disk-full test holds its small tablespace full: the server cannot write that
 * tablespace's dirty pages until the test frees it, a few seconds later. CI's runs side by side
 * met this (2026-11-29). Tried again for up to a minute, stretched by the machine's load.
 */
async function dropDatabase(client: pg.Client, name: string): Promise<void> {
  const deadline = Date.now() + scaledMs(60_000);
  for (;;) {
    try {
      await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      return;
    } catch (error) {
      if (!/checkpoint request failed/.test((error as Error).message) || Date.now() > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** Drops whatever this run created and did not drop itself (a failed test, say). */
export async function dropAllTestDatabases(): Promise<void> {
  if (await postgresProblem()) return;
  await onDatabase(ADMIN_URL, async (client) => {
    const { rows } = await client.query<{ datname: string }>('SELECT datname FROM pg_database WHERE datname LIKE $1', [`${RUN_PREFIX}_%`]);
    for (const { datname } of rows) await dropDatabase(client, datname);
  });
}

/**
 * A fresh PostgreSQL database for the enclosing describe(): made before its tests (which
 * need the server: under CI=true they fail without it, elsewhere they skip), dropped after.
 * Returns a getter for its URL.
 */
export function usePostgresDatabase(): () => string {
  let url: string | undefined;
  before(async function () {
    await requirePostgres(this);
    url = await createTestDatabase();
  });
  after(async () => {
    if (url) await dropTestDatabase(url);
  });
  return () => {
    if (!url) throw new Error('the PostgreSQL test database is not made yet');
    return url;
  };
}
