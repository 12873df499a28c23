import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { hostTag, processStart } from '../../../../src/lib/backup/locks/work-owner.js';
import { claimCopy, claimDueCopies, claimHolderState, copyBacklog, copyOwner, COPY_LEASE_MS, notePendingCopies } from '../../../../src/lib/backup/targets/copies.js';
import type { Database } from '../../../../src/lib/storage/types.js';
import { forEachEngine } from '../../../support/engines.js';

/** The pid of a process that ran on this host and has ended. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' });
  return Number(child.stdout);
}

/** Issue 35, item 7: the claims of off-site copies (copies.ts), whose holder may be killed while copying. */
forEachEngine('off-site copy claims', (fixture) => {
  let db: Database;
  const at = new Date('2026-11-26T03:00:00.000Z');
  const later = new Date(at.getTime() + 60_000);
  const here = hostTag();
  const otherHost = here === 'ffffffff' ? 'eeeeeeee' : 'ffffffff';
  let serial = 0;

  beforeEach(async () => {
    db ??= await fixture.freshDatabase();
    await db.execute('DELETE FROM backup_copies');
  });

  /** A noted copy of a backup of its own, claimed by `holder` at `at` for the lease. */
  const claimedBy = async (holder: string): Promise<string> => {
    serial += 1;
    const id = `20261126T03000000${serial % 10}Z-${serial.toString(16).padStart(6, '0')}`;
    await notePendingCopies(db, id, ['nas'], at);
    await db.execute('UPDATE backup_copies SET claimed_by = ?, claimed_until = ? WHERE backup_id = ?', [holder, new Date(at.getTime() + COPY_LEASE_MS).toISOString(), id]);
    return id;
  };
  const me = copyOwner();

  it('names its holder by host, pid and the process\'s start, and the attempt: another for every claimant', () => {
    assert.match(me, new RegExp(`^${here}:${process.pid}:${processStart()}/[0-9a-f]{12}$`));
    assert.match(processStart()!, /^\d+$/);
    assert.notEqual(copyOwner(), me);
    // The process decides whether a claim is held, not the attempt; an older release's names have none.
    assert.equal(claimHolderState(me), 'alive');
    assert.equal(claimHolderState(`${here}:${process.pid}:${processStart()}`), 'alive');
    assert.equal(claimHolderState(`${here}:${deadPid()}:12345/0123456789ab`), 'gone');
  });

  it('takes over at once the claims of processes on this host that are gone, with or without their start (an older release\'s names)', async () => {
    const dead = deadPid();
    const gone = [await claimedBy(`${here}:${dead}:12345`), await claimedBy(`${here}:${dead}`)];
    // A process that reuses our pid after a restart (a container's pid 1) is not the one that claimed.
    gone.push(await claimedBy(`${here}:${process.pid}:${Number(processStart()) - 1}`));
    assert.deepEqual(Object.fromEntries([...(await copyBacklog(db, later))].map(([target, backlog]) => [target, [backlog.pending, backlog.copying, backlog.stuck, backlog.newest?.state]])), {
      nas: [3, 0, 3, 'stuck'],
    });
    const claimed = await claimDueCopies(db, me, later, 10);
    assert.deepEqual(claimed.map((copy) => copy.backup_id), [...gone].sort());
    const holders = await db.query('SELECT DISTINCT claimed_by FROM backup_copies');
    assert.deepEqual(holders.map((row) => row.claimed_by), [me]);
    assert.deepEqual((await copyBacklog(db, later)).get('nas'), { pending: 3, copying: 3, stuck: 0, newest: { backup_id: [...gone].sort().at(-1), state: 'copying', attempts: 0, next_attempt_at: null } });
  });

  it('leaves a live process\'s claim and another host\'s until the lease ends', async () => {
    const parent = process.ppid;
    const live = [await claimedBy(`${here}:${parent}:${processStart(parent)}`), await claimedBy(`${otherHost}:${deadPid()}:1`), await claimedBy(`${here}:${parent}`)];
    assert.deepEqual([...(await claimDueCopies(db, me, later, 10))], []);
    assert.equal(await claimCopy(db, live[0]!, 'nas', me, later), false);
    assert.equal(await claimCopy(db, live[1]!, 'nas', me, later), false);
    assert.deepEqual((await copyBacklog(db, later)).get('nas')?.copying, 3);
    const afterLease = new Date(at.getTime() + COPY_LEASE_MS + 1000);
    assert.deepEqual((await copyBacklog(db, afterLease)).get('nas')?.newest?.state, 'waiting');
    assert.equal((await claimDueCopies(db, me, afterLease, 10)).length, 3);
  });

  it('gives `backup copy` (claimCopy) a dead process\'s claim too, the one of a process that reused its pid included', async () => {
    const dead = await claimedBy(`${here}:${deadPid()}:12345`);
    const reused = await claimedBy(`${here}:${process.pid}:${Number(processStart()) - 1}`);
    assert.equal(await claimCopy(db, dead, 'nas', me, later), true);
    assert.equal(await claimCopy(db, reused, 'nas', me, later), true);
    // And never a copy it claimed itself to another process of this host that runs.
    assert.equal(await claimCopy(db, dead, 'nas', `${here}:${process.ppid}:${processStart(process.ppid)}`, later), false);
  });

  // A daemon's own copier and a request to its API (POST /api/backups/{id}/copy) run in one
  // process: a claim must tell their attempts apart, or both upload the same backup at once.
  it('never gives a live claim of this very process to another attempt of it: the copier\'s to an API copy, or one request\'s to another', async () => {
    const copier = copyOwner();
    await notePendingCopies(db, '20261126T030000000Z-0c0c0c', ['nas'], at);
    assert.deepEqual((await claimDueCopies(db, copier, at, 10)).map((copy) => copy.backup_id), ['20261126T030000000Z-0c0c0c']);
    const request = copyOwner();
    assert.equal(await claimCopy(db, '20261126T030000000Z-0c0c0c', 'nas', request, later), false, 'an API copy took the claim the copier holds');
    assert.equal(claimHolderState(copier), 'alive');

    await notePendingCopies(db, '20261126T030000000Z-0d0d0d', ['nas'], at);
    assert.equal(await claimCopy(db, '20261126T030000000Z-0d0d0d', 'nas', request, at), true);
    assert.equal(await claimCopy(db, '20261126T030000000Z-0d0d0d', 'nas', copyOwner(), later), false, 'a second request took the first one\'s claim');
    assert.deepEqual(await claimDueCopies(db, copyOwner(), later, 10), [], 'nor does the copier take a request\'s');
    const holders = await db.query('SELECT backup_id, claimed_by FROM backup_copies ORDER BY backup_id');
    assert.deepEqual(holders.map((row) => row.claimed_by), [copier, request]);
  });

  it('counts a holder that was killed and not reaped yet (a zombie, which still answers signal 0) as gone', async () => {
    // python3 forks a child that ends at once and is never waited for.
    const parent = spawn('python3', ['-c', 'import os, time\npid = os.fork()\nif pid == 0: os._exit(0)\nprint(pid, flush=True)\ntime.sleep(60)'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const [line] = (await once(parent.stdout!, 'data')) as [Buffer];
      const zombie = Number(line.toString().trim());
      await new Promise((resolve) => setTimeout(resolve, 100));
      process.kill(zombie, 0);
      assert.equal(claimHolderState(`${here}:${zombie}:${processStart(zombie) ?? 1}`), 'gone');
      assert.equal(claimHolderState(`${here}:${zombie}`), 'gone');
    } finally {
      parent.kill('SIGKILL');
    }
  });

  it('tells a waiting copy\'s retry from one not tried yet', async () => {
    await notePendingCopies(db, '20261126T030000000Z-00aaaa', ['nas', 'vault'], at);
    await db.execute(`UPDATE backup_copies SET status = 'failed', attempts = 2, next_attempt_at = ? WHERE target = 'vault'`, [later.toISOString()]);
    const backlog = await copyBacklog(db, at);
    assert.deepEqual(backlog.get('nas')?.newest, { backup_id: '20261126T030000000Z-00aaaa', state: 'waiting', attempts: 0, next_attempt_at: at.toISOString() });
    assert.deepEqual(backlog.get('vault')?.newest, { backup_id: '20261126T030000000Z-00aaaa', state: 'waiting', attempts: 2, next_attempt_at: later.toISOString() });
  });
});
