import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import pg from 'pg';
import copy from 'pg-copy-streams';
import { LicenseServerError } from '../errors.js';
import { TABLES } from '../storage/migrations.js';

/**
 * Replaces our tables with a dump's in one transaction: DROP them all, run the dump, COMMIT.
 * Any failure rolls back, leaving the database exactly as it was.
 */
export async function restorePostgres(url: string, dumpFile: string): Promise<void> {
  const client = await connect(url, 'license-server restore');
  try {
    await client.query('BEGIN');
    for (const table of [...TABLES].reverse()) await client.query(`DROP TABLE IF EXISTS ${table.name} CASCADE`);
    await executeDump(client, dumpFile);
    await client.query('COMMIT');
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw asBackupError(error);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** Loads a dump into a fresh scratch database beside `url`'s, counts its rows, drops it. */
export async function loadDumpIntoScratch(url: string, dumpFile: string): Promise<number> {
  const name = `license_validate_${randomBytes(6).toString('hex')}`;
  const admin = await connect(url, 'license-server validate');
  try {
    await admin.query(`CREATE DATABASE ${name}`);
    const scratchUrl = new URL(url);
    scratchUrl.pathname = `/${name}`;
    const client = await connect(scratchUrl.toString(), 'license-server validate');
    try {
      await client.query('BEGIN');
      await executeDump(client, dumpFile);
      let rows = 0;
      for (const table of TABLES) {
        const result = await client.query(`SELECT count(*)::bigint AS n FROM ${table.name}`).catch(() => undefined);
        rows += Number(result?.rows[0]?.n ?? 0);
      }
      await client.query('COMMIT');
      return rows;
    } catch (error) {
      throw asBackupError(error);
    } finally {
      await client.end().catch(() => undefined);
    }
  } finally {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => undefined);
    await admin.end().catch(() => undefined);
  }
}

/**
 * Runs a dump written by dumpPostgres: statements end with `;` at the end of a line; a
 * `COPY ... FROM stdin;` statement is followed by its rows, one per line, up to `\.`.
 */
async function executeDump(client: pg.Client, dumpFile: string): Promise<void> {
  const lines = createInterface({ input: createReadStream(dumpFile, { encoding: 'utf8', highWaterMark: 1024 * 1024 }), crlfDelay: Infinity });
  let statement = '';
  let sink: (Writable & { done: Promise<void> }) | undefined;
  let batch: string[] = [];
  let batchSize = 0;
  const flush = async () => {
    if (!sink || batch.length === 0) return;
    const ok = sink.write(batch.join(''));
    batch = [];
    batchSize = 0;
    if (!ok) await new Promise<void>((resolve) => sink!.once('drain', () => resolve()));
  };
  for await (const line of lines) {
    if (sink) {
      if (line === '\\.') {
        await flush();
        sink.end();
        await sink.done;
        sink = undefined;
      } else {
        batch.push(`${line}\n`);
        batchSize += line.length + 1;
        if (batchSize >= 1024 * 1024) await flush();
      }
      continue;
    }
    if (statement === '' && (line.trim() === '' || line.startsWith('--'))) continue;
    statement += `${line}\n`;
    if (!line.trimEnd().endsWith(';')) continue;
    const text = statement.trim();
    statement = '';
    if (/^COPY [\s\S]+ FROM stdin;$/.test(text)) {
      const stream = client.query(copy.from(text.slice(0, -1)));
      sink = Object.assign(stream, { done: finished(stream) });
      // A COPY that fails settles `done`; keep the rejection from going unhandled meanwhile.
      sink.done.catch(() => undefined);
    } else {
      await client.query(text);
    }
  }
  if (sink) throw new LicenseServerError('BACKUP_CORRUPT', 'backup is damaged: the PostgreSQL dump ends inside a COPY block');
  if (statement.trim() !== '') throw new LicenseServerError('BACKUP_CORRUPT', 'backup is damaged: the PostgreSQL dump ends inside a statement');
}

async function connect(url: string, applicationName: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString: url, application_name: applicationName });
  try {
    await client.connect();
  } catch (error) {
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL: ${(error as { code?: string }).code ?? 'error'}`);
  }
  return client;
}

function asBackupError(error: unknown): unknown {
  if (error instanceof LicenseServerError) return error;
  const code = (error as { code?: string }).code;
  if (code && /^[0-9A-Z]{5}$/.test(code)) {
    return new LicenseServerError('BACKUP_CORRUPT', `backup is damaged: PostgreSQL refused the dump (${code}: ${(error as Error).message.split('\n')[0]})`);
  }
  return error;
}
