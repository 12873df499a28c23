import { createReadStream } from 'node:fs';
import type { Writable } from 'node:stream';
import { finished } from 'node:stream/promises';
import type pg from 'pg';
import copy from 'pg-copy-streams';
import { LicenseServerError } from '../../errors.js';

const NEWLINE = 0x0a;
const END_OF_ROWS = Buffer.from('\\.\n');
const NEWLINE_END_OF_ROWS = Buffer.from('\n\\.\n');

/**
 * Runs a dump written by dumpPostgres (either layout: docs/backup-format.md), from a file
 * or as it is read from an archive, on `client`, inside the caller's transaction. Statements end with `;` at the end of a line; a
 * `COPY ... FROM stdin;` statement is followed by its rows up to a line `\.`. The file is
 * handled as bytes: rows go to the server in the large slices they were read in, never
 * decoded or split into lines here.
 *
 * Two things make a load faster than running the file with psql, with the same result:
 * - CREATE INDEX statements are held back until every row is in (dumps of the first layout
 *   create indexes before their rows; building an index once is much cheaper than growing
 *   it row by row), and one that a later DROP INDEX names is never built;
 * - a table this load created itself gets COPY ... WITH (FREEZE): its rows are written
 *   already frozen and visible, so nothing has to revisit them after the commit. The table
 *   is new in this transaction, so no other transaction could have seen it before anyway.
 */
function indexName(createIndex: string): string | undefined {
  return /^CREATE (?:UNIQUE )?INDEX (?:IF NOT EXISTS )?(\S+) /i.exec(createIndex)?.[1];
}

export async function loadDump(client: pg.Client, dump: string | AsyncIterable<Buffer>, options: { readSize?: number } = {}): Promise<void> {
  const deferred: string[] = [];
  const created = new Set<string>();
  let copying: (Writable & { done: Promise<void> }) | undefined;
  // Rows written since the COPY began: a `\.` line can only start at the block's start or after a newline.
  let rowsStarted = false;
  let pending: Buffer = Buffer.alloc(0);
  let lines: string[] = [];

  const runStatement = async (statement: string) => {
    const table = /^CREATE TABLE (?!IF NOT EXISTS )(\S+) \(/i.exec(statement);
    if (table) created.add(table[1]!);
    const dropped = /^DROP INDEX (\S+?);?$/i.exec(statement);
    const held = dropped ? deferred.findIndex((index) => indexName(index) === dropped[1]) : -1;
    if (/^CREATE (UNIQUE )?INDEX /i.test(statement)) {
      deferred.push(statement);
    } else if (held >= 0) {
      // A later migration dropped an index still held back (a dump that replays migrations,
      // such as one moved over from SQLite): it is never built.
      deferred.splice(held, 1);
    } else if (/^COPY [\s\S]+ FROM stdin;$/.test(statement)) {
      const target = /^COPY (\S+) /.exec(statement)![1]!;
      const sql = created.has(target) ? `${statement.slice(0, -1)} WITH (FREEZE)` : statement.slice(0, -1);
      const stream = client.query(copy.from(sql));
      copying = Object.assign(stream, { done: finished(stream) });
      // A COPY that fails settles `done`; keep the rejection from going unhandled meanwhile.
      copying.done.catch(() => undefined);
      rowsStarted = false;
    } else {
      await client.query(statement);
    }
  };
  const send = async (rows: Buffer) => {
    if (rows.length === 0) return;
    rowsStarted = true;
    // A COPY the server refuses (its disk full) never drains: its failure ends the wait instead.
    if (!copying!.write(rows)) await Promise.race([new Promise<void>((resolve) => copying!.once('drain', () => resolve())), copying!.done]);
  };

  const source = typeof dump === 'string' ? createReadStream(dump, { highWaterMark: options.readSize ?? 1024 * 1024 }) : dump;
  try {
    await readStatements();
  } catch (error) {
    // A source that fails mid-COPY (an archive found damaged) must not leave the COPY open:
    // CopyFail ends it on the server and the connection can roll back.
    if (copying) {
      copying.destroy(error instanceof Error ? error : new Error(String(error)));
      await copying.done.catch(() => undefined);
    }
    throw error;
  }
  async function readStatements(): Promise<void> {
    for await (const chunk of source) {
      let data: Buffer = pending.length ? Buffer.concat([pending, chunk as Buffer]) : (chunk as Buffer);
      pending = Buffer.alloc(0);
      for (;;) {
        if (copying) {
          const at = endOfRows(data, rowsStarted);
          if (at === -1) {
            // Hold back what could be the start of the `\.` line split across two reads.
            const keep = Math.min(data.length, NEWLINE_END_OF_ROWS.length - 1);
            await send(data.subarray(0, data.length - keep));
            pending = Buffer.from(data.subarray(data.length - keep));
            break;
          }
          await send(data.subarray(0, at));
          data = data.subarray(at + END_OF_ROWS.length);
          copying.end();
          await copying.done;
          copying = undefined;
          continue;
        }
        // Statement mode: whole lines up to one that ends with a semicolon.
        const newline = data.indexOf(NEWLINE);
        if (newline === -1) {
          pending = Buffer.from(data);
          break;
        }
        const line = data.toString('utf8', 0, newline);
        data = data.subarray(newline + 1);
        if (line.startsWith('--')) continue;
        lines.push(line);
        if (line.trimEnd().endsWith(';')) {
          const statement = lines.join('\n').trim();
          lines = [];
          if (statement) await runStatement(statement);
        }
      }
    }
  }
  if (copying) throw new LicenseServerError('BACKUP_CORRUPT', 'backup is damaged: the PostgreSQL dump ends inside a COPY block');
  const rest = [...lines, pending.toString('utf8')].filter((line) => line.trim() !== '' && !line.startsWith('--')).join('\n').trim();
  if (rest) await runStatement(rest);
  for (const statement of deferred) await client.query(statement);
}

/** Where the `\.` line that ends the rows starts in `data`, or -1 when it is not in it yet. */
function endOfRows(data: Buffer, rowsStarted: boolean): number {
  if (!rowsStarted && data.length >= END_OF_ROWS.length && data.subarray(0, END_OF_ROWS.length).equals(END_OF_ROWS)) return 0;
  const at = data.indexOf(NEWLINE_END_OF_ROWS);
  return at === -1 ? -1 : at + 1;
}
