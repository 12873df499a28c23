import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import pg from 'pg';
import { CopyOut } from '../../../src/lib/backup/engines/copy-out.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from '../../support/postgres.js';

/** Reads `COPY sql TO STDOUT` through CopyOut; the client stays usable after it. */
async function copyOut(client: pg.Client, sql: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of client.query(new CopyOut(`COPY ${sql} TO STDOUT`))) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('COPY TO STDOUT reader (CopyOut)', () => {
  let url: string;
  let client: pg.Client;

  before(async function () {
    await requirePostgres(this);
    url = await createTestDatabase();
    client = new pg.Client({ connectionString: url });
    await client.connect();
    // Rows of every length from 0 to a few KiB, so that socket reads end inside message
    // headers and payloads at many different offsets; text that COPY escapes; a NOTICE
    // raised mid-copy by a function the rows call.
    await client.query(`
      CREATE TABLE t (id int, body text);
      INSERT INTO t SELECT i, CASE WHEN i % 7 = 0 THEN NULL ELSE repeat(E'a\\tb\\\\c\\n ü ', i % 400) END FROM generate_series(1, 60000) AS i;
      CREATE FUNCTION noisy(i int) RETURNS int LANGUAGE plpgsql AS $$ BEGIN IF i % 20000 = 0 THEN RAISE NOTICE 'row %', i; END IF; RETURN i; END $$;
    `);
  });
  after(async () => {
    await client?.end().catch(() => undefined);
    if (url) await dropTestDatabase(url).catch(() => undefined);
  });

  it('gives exactly the bytes psql gets for the same COPY, and the connection goes on', async () => {
    const ours = await copyOut(client, 't');
    const theirs = execFileSync('psql', ['-qAt', url, '-c', 'COPY t TO STDOUT'], { maxBuffer: 1 << 30 });
    assert.equal(ours.length, theirs.length);
    assert.equal(createHash('sha256').update(ours).digest('hex'), createHash('sha256').update(theirs).digest('hex'));
    assert.equal((await client.query('SELECT count(*)::int AS n FROM t')).rows[0].n, 60000);
  });

  it('reads past notices the server sends between rows (they are not rows)', async () => {
    const rows = (await copyOut(client, '(SELECT noisy(id), id FROM t ORDER BY id)')).toString('utf8').split('\n');
    assert.equal(rows.length, 60001);
    assert.deepEqual([rows[0], rows[19999], rows[20000], rows[59999], rows[60000]], ['1\t1', '20000\t20000', '20001\t20001', '60000\t60000', '']);
  });

  it('fails with the server\'s error, before or during the rows, and the connection goes on', async () => {
    await assert.rejects(copyOut(client, 'missing_table'), /relation "missing_table" does not exist/);
    await assert.rejects(copyOut(client, '(SELECT 1 / (id - 30000) FROM t ORDER BY id)'), /division by zero/);
    assert.equal((await client.query('SELECT 42 AS n')).rows[0].n, 42);
    assert.equal((await copyOut(client, '(SELECT 1)')).toString(), '1\n');
  });
});
