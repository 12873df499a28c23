import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBackup } from '../../../../src/lib/backup/create.js';
import { Copier } from '../../../../src/lib/backup/targets/copier.js';
import { resolveConfig, type ResolvedConfig } from '../../../../src/lib/config/resolve.js';
import type { Database } from '../../../../src/lib/storage/types.js';
import { forEachEngine } from '../../../support/engines.js';
import { FakeClock } from '../../../support/fake-clock.js';
import { deliveries, everyEventToWebhook } from '../../../support/outbox-rows.js';

const HOUR = 3600_000;

/** The daemon's off-site copies (copier.ts): retries on the backoff schedule, the catch-up, claims, backup.stale. */
forEachEngine('the daemon\'s off-site copier', (fixture) => {
  let work: string;
  let db: Database;
  let config: ResolvedConfig;
  let nas: string;
  const clock = new FakeClock(Date.parse('2026-11-26T02:00:00.000Z'));
  const copier = (more: Partial<ConstructorParameters<typeof Copier>[0]> = {}) =>
    new Copier({ database: () => db, config: () => config, log: () => undefined, clock: () => clock.now(), retry: { firstDelaySeconds: 60, maxDelaySeconds: 3600 }, catchUpMs: 0, ...more });
  const rows = () => db.query<{ backup_id: string; target: string; status: string; attempts: number; last_error: string | null }>(
    'SELECT backup_id, target, status, attempts, last_error FROM backup_copies ORDER BY backup_id, target',
  );

  before(async function () {
    this.timeout(30_000);
    work = mkdtempSync(path.join(tmpdir(), 'license-copier-'));
    nas = path.join(work, 'nas');
    mkdirSync(nas);
    const url = await fixture.freshUrl();
    config = await resolveConfig({
      cwd: work,
      env: {
        LICENSE_DATABASE_URL: url,
        LICENSE_BACKUP_PATH: path.join(work, 'backups'),
        LICENSE_BACKUP_ENCRYPTION_KEY: 'ef'.repeat(32),
        LICENSE_BACKUP_MAX_AGE: '26h',
        LICENSE_BACKUP_TARGETS: JSON.stringify([{ name: 'nas', kind: 'file', path: nas }]),
      },
    });
    db = await fixture.freshDatabase();
    // The fixture's database is the one the backups are made of.
    config = { ...config, settings: { ...config.settings, database: { ...config.settings.database, url } } };
    await db.close();
    const { openDatabase } = await import('../../../../src/lib/storage/open.js');
    db = await openDatabase(url);
    await everyEventToWebhook(db);
  });
  after(async () => {
    await db?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('retries a failed copy on its schedule, not before, and raises backup.copy_failed for each failure', async function () {
    this.timeout(60_000);
    const record = await createBackup({ db, config, trigger: 'scheduled', toolVersion: '0.1.0', context: { actor: 'scheduler', clock: () => clock.now() } });
    // Noted as the daemon notes what it makes; the rounds below are run by hand.
    const noting = copier();
    await noting.stop(0);
    renameSync(nas, `${nas}.unmounted`);
    try {
      await noting.noteBackup(record.backup_id);
      const [first] = await copier().round();
      assert.equal(first?.result, 'failed');
      assert.deepEqual((await rows()).map((row) => [row.status, row.attempts]), [['failed', 1]]);
      assert.equal((await deliveries(db, 'backup.copy_failed')).length, 1);
      // Not due yet: no attempt, nothing raised.
      clock.advance(30_000);
      assert.deepEqual(await copier().round(), []);
      clock.advance(31_000);
      assert.equal((await copier().round())[0]?.result, 'failed');
      assert.deepEqual((await rows()).map((row) => [row.status, row.attempts]), [['failed', 2]]);
      assert.equal((await deliveries(db, 'backup.copy_failed')).length, 2);
    } finally {
      renameSync(`${nas}.unmounted`, nas);
    }
    clock.advance(121_000);
    const [copied] = await copier().round();
    assert.equal(copied?.result, 'copied');
    assert.deepEqual((await rows()).map((row) => [row.status, row.last_error]), [['copied', null]]);
    assert.ok(readdirSync(nas).includes(`${record.backup_id}.backup.json`));
  });

  it('catches up what a target lost, and copies each backup once however many daemons look', async function () {
    this.timeout(60_000);
    for (const name of readdirSync(nas)) rmSync(path.join(nas, name));
    const daemons = [copier(), copier(), copier()];
    const outcomes = (await Promise.all(daemons.map((daemon) => daemon.round()))).flat();
    // One upload; a daemon whose catch-up listed the target before that copy ended finds it there.
    assert.deepEqual(outcomes.filter((outcome) => outcome.result !== 'present').map((outcome) => outcome.result), ['copied'], JSON.stringify(outcomes));
  });

  it('raises backup.stale once per place and newest backup, and again only for a newer one gone stale', async function () {
    this.timeout(60_000);
    const before = (await deliveries(db, 'backup.stale')).length;
    clock.advance(27 * HOUR);
    // The file's own times are real ones; the stale check reads created_at from the index.
    await copier().round();
    await copier().round();
    const stale = (await deliveries(db, 'backup.stale')).slice(before);
    assert.deepEqual(stale.map((delivery) => delivery.data.place).sort(), ['local', 'nas']);
    await createBackup({ db, config, trigger: 'scheduled', toolVersion: '0.1.0', context: { actor: 'scheduler', clock: () => clock.now() } });
    const fresh = copier();
    await fresh.round();
    assert.equal((await deliveries(db, 'backup.stale')).length, before + 2, 'fresh again: no alert');
    clock.advance(27 * HOUR);
    await copier().round();
    assert.equal((await deliveries(db, 'backup.stale')).length, before + 4, 'the newer backups went stale too');
  });
});
