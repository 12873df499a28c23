import assert from 'node:assert/strict';
import pg from 'pg';
import { ADMIN_URL, requirePostgres } from '../../support/postgres.js';
import { readWalArchiving, segmentsBetween, walArchivingOf } from '../../../src/lib/backup/wal-archiving.js';
import type { Queryable } from '../../../src/lib/storage/types.js';

/** Issue 37, Deliver 2: how pg_stat_archiver reads. The whole path, pgBackRest archiving a real cluster, is test/commands/pg-wal-archiving.test.ts. */
describe('PostgreSQL WAL archiving status (backup/wal-archiving.ts)', function () {
  const row = (fields: Partial<Parameters<typeof walArchivingOf>[0]> = {}) => ({
    archive_mode: 'on',
    archive_timeout: '60',
    wal_segment_size: String(16 * 1024 * 1024),
    archived_count: '12',
    last_archived_wal: '00000001000000000000000A',
    last_archived_time: '2026-11-29T14:02:00Z',
    failed_count: '0',
    last_failed_wal: null,
    last_failed_time: null,
    current_wal: '00000001000000000000000B',
    now: '2026-11-29T14:03:00Z',
    ...fields,
  });

  it('counts the completed WAL files between the last archived and the current one, across the 2^32-byte boundary and for 1 MB files', () => {
    assert.equal(segmentsBetween('00000001000000000000000A', '00000001000000000000000B', 16 * 1024 * 1024), 0);
    assert.equal(segmentsBetween('00000001000000000000000A', '00000001000000000000000D', 16 * 1024 * 1024), 2);
    // 256 files of 16 MB to a 4 GB "log" number: ...000000FF is followed by ...0100000000.
    assert.equal(segmentsBetween('0000000100000000000000FF', '000000010000000100000000', 16 * 1024 * 1024), 0);
    assert.equal(segmentsBetween('0000000100000000000000FE', '000000010000000100000001', 16 * 1024 * 1024), 2);
    assert.equal(segmentsBetween('000000010000000000000FFF', '000000010000000100000000', 1024 * 1024), 0);
    // A backup label names its segment; a history file names none.
    assert.equal(segmentsBetween('00000001000000000000000A.00000028.backup', '00000001000000000000000C', 16 * 1024 * 1024), 1);
    assert.equal(segmentsBetween('00000002.history', '00000002000000000000000C', 16 * 1024 * 1024), null);
  });

  it('tells ok, failing, stale and off apart, and warns of an archive_timeout over 60 s or off', () => {
    const ok = walArchivingOf(row());
    assert.deepEqual([ok.state, ok.problem, ok.warnings, ok.last_archived_age_seconds, ok.waiting_segments], ['ok', null, [], 60, 0]);
    const failing = walArchivingOf(row({ failed_count: '3', last_failed_wal: '00000001000000000000000B', last_failed_time: '2026-11-29T14:02:30Z' }));
    assert.equal(failing.state, 'failing');
    assert.match(failing.problem!, /^archiving 00000001000000000000000B failed at 2026-11-29T14:02:30\.000Z \(3 failure/);
    // An old failure, archived since: ok.
    assert.equal(walArchivingOf(row({ failed_count: '3', last_failed_wal: '000000010000000000000009', last_failed_time: '2026-11-29T14:01:00Z' })).state, 'ok');
    // Completed files wait: stale only past max(300 s, 2 archive_timeout) since the last archive.
    assert.equal(walArchivingOf(row({ current_wal: '00000001000000000000000D', last_archived_time: '2026-11-29T13:58:30Z' })).state, 'ok');
    const stale = walArchivingOf(row({ current_wal: '00000001000000000000000D', last_archived_time: '2026-11-29T13:57:00Z' }));
    assert.deepEqual([stale.state, stale.waiting_segments], ['stale', 2]);
    assert.match(stale.problem!, /^2 completed WAL file\(s\) wait to be archived, and the last was archived 360 s ago/);
    // A quiet server archives nothing for long and is not stale: nothing waits.
    assert.equal(walArchivingOf(row({ last_archived_time: '2026-11-28T14:03:00Z' })).state, 'ok');
    assert.equal(walArchivingOf(row({ archive_mode: 'off', archived_count: '0', last_archived_wal: null, last_archived_time: null })).state, 'off');
    assert.match(walArchivingOf(row({ archive_timeout: '300' })).warnings[0]!, /^archive_timeout is 300 s: .*60 s or less$/);
    assert.match(walArchivingOf(row({ archive_timeout: '0' })).warnings[0]!, /^archive_timeout is off: /);
  });

  it('reads a real server\'s pg_stat_archiver as a role without superuser: the suite\'s server archives nothing, and says off', async function () {
    await requirePostgres(this);
    const admin = new pg.Client({ connectionString: ADMIN_URL });
    await admin.connect();
    const role = `license_archiver_${process.pid}`;
    await admin.query(`CREATE ROLE ${role} LOGIN`);
    const url = new URL(ADMIN_URL);
    url.username = role;
    const client = new pg.Client({ connectionString: url.toString() });
    try {
      await client.connect();
      const db: Queryable = { query: async (sql) => (await client.query(sql)).rows, execute: async () => 0 };
      const status = await readWalArchiving(db);
      assert.equal(status.archive_mode, 'off');
      assert.equal(status.state, 'off');
      assert.match(status.current_wal!, /^[0-9A-F]{24}$/);
      assert.ok(Math.abs(Date.parse(status.as_of) - Date.now()) < 60_000);
    } finally {
      await client.end().catch(() => undefined);
      await admin.query(`DROP ROLE ${role}`);
      await admin.end();
    }
  });
});
