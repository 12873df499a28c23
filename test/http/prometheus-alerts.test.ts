import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createBackup } from '../../src/lib/backup/create.js';
import { resolveConfig } from '../../src/lib/config/resolve.js';
import { openDatabase } from '../../src/lib/storage/open.js';
import { freePort } from '../support/license-fixture.js';
import { PROMTOOL, requirePrometheus, startPrometheus, testRules, type TestPrometheus } from '../support/prometheus.js';
import { startServe, type ServeProcess } from '../support/serve.js';

const RULES = new URL('../../docs/prometheus-alerts.yml', import.meta.url).pathname;
const HOUR = 3600;

/**
 * Issue 35 item 30: LicenseServerBackupStale fired at a fixed 26 hours whatever backup.max_age
 * said. Each daemon now exports backup.max_age (license_server_backup_max_age_seconds) and
 * the rule compares the newest backup's age with it (26 hours when no daemon sets it).
 */
describe('LicenseServerBackupStale follows backup.max_age (docs/prometheus-alerts.yml)', function () {
  this.timeout(120_000);

  it('fires, in promtool\'s rule tests, past the configured max age and not before; past 26 hours when none is set', function () {
    requirePrometheus(this, PROMTOOL);
    // One daemon's series: its newest good scheduled backup was made at time 0.
    const daemon = (maxAgeSeconds: number | undefined, instance = 'a:9464') => [
      { series: `license_server_store_backup_last_success_timestamp_seconds{instance="${instance}",trigger="scheduled"}`, values: '0+0x400' },
      ...(maxAgeSeconds === undefined ? [] : [{ series: `license_server_backup_max_age_seconds{instance="${instance}"}`, values: `${maxAgeSeconds}+0x400` }]),
    ];
    const stale = (ageSeconds: number, age: string) => [{
      exp_labels: { severity: 'critical' },
      exp_annotations: {
        summary: 'No good backup of the license database within backup.max_age',
        description: `The newest manual or scheduled backup is ${age} old (${ageSeconds} s).`,
      },
    }];
    const at = (minutes: number, expected: unknown[]) => ({ eval_time: `${minutes}m`, alertname: 'LicenseServerBackupStale', exp_alerts: expected });
    const tests = [
      // backup.max_age 1h: older than that from minute 60, firing once that held for 10 minutes.
      { interval: '1m', input_series: daemon(HOUR), alert_rule_test: [at(59, []), at(65, []), at(75, stale(4500, '1h 15m 0s'))] },
      // 3h: not at 75 minutes, at 3h15m.
      { interval: '1m', input_series: daemon(3 * HOUR), alert_rule_test: [at(75, []), at(185, []), at(195, stale(11_700, '3h 15m 0s'))] },
      // Two daemons configured apart: the smaller max age decides.
      { interval: '1m', input_series: [...daemon(3 * HOUR, 'a:9464'), ...daemon(HOUR, 'b:9464')], alert_rule_test: [at(75, stale(4500, '1h 15m 0s'))] },
      // Unset on every daemon: 26 hours.
      { interval: '5m', input_series: daemon(undefined), alert_rule_test: [at(25 * 60, []), at(26 * 60 + 15, stale(94_500, '1d 2h 15m 0s'))] },
    ];
    passRuleTests(tests);
  });

  describe('a real Prometheus, with the rule file, scraping a real daemon whose newest backup is two hours old', () => {
    let dir: string;
    let serve: ServeProcess | undefined;
    let prometheus: TestPrometheus | undefined;

    before(function () {
      requirePrometheus(this);
      dir = mkdtempSync(path.join(tmpdir(), 'license-alert-serve-'));
    });
    after(async () => {
      await prometheus?.stop();
      if (serve) await serve.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it('keeps the rule inactive with backup.max_age 3h, has it pending once the daemon is restarted with 1h, and inactive again with none', async () => {
      const dataDir = path.join(dir, 'data');
      const env = { LICENSE_DATA_DIR: dataDir, LICENSE_BACKUP_PATH: path.join(dir, 'backups') };
      // A real backup, made by the library with a clock two hours back: its id, audit entry and
      // index say it was made then.
      const madeAt = new Date(Date.now() - 2 * HOUR * 1000);
      const config = await resolveConfig({ cwd: dir, env });
      const db = await openDatabase(config.settings.database.url);
      try {
        await createBackup({ db, config, trigger: 'scheduled', toolVersion: 'test', context: { actor: 'test', clock: () => madeAt } });
      } finally {
        await db.close();
      }

      const port = await freePort();
      const daemon = (maxAge: string | undefined) => startServe({ ...env, ...(maxAge ? { LICENSE_BACKUP_MAX_AGE: maxAge } : {}), LICENSE_METRICS_PORT: String(port), LICENSE_METRICS_STORE_REFRESH: '1' });
      serve = await daemon('3h');
      prometheus = await startPrometheus([{ address: `127.0.0.1:${port}` }], { ruleFiles: [RULES] });
      assert.equal(await prometheus.waitFor('license_server_backup_max_age_seconds', (value) => value > 0), 3 * HOUR);
      const seen = await prometheus.waitFor('license_server_store_backup_last_success_timestamp_seconds{trigger="scheduled"}', (value) => value > 0);
      assert.equal(Math.round(seen), Math.round(madeAt.getTime() / 1000));
      // An evaluation that saw both series: the rule holds no alert.
      const since = Date.now();
      const evaluated = await waitForRule(prometheus, (rule) => Date.parse(rule.lastEvaluation) > since + 1000);
      assert.equal(evaluated.health, 'ok', JSON.stringify(evaluated));
      assert.equal(evaluated.state, 'inactive', JSON.stringify(evaluated));
      assert.deepEqual(evaluated.alerts, []);

      assert.equal((await serve.stop()).code, 0);
      serve = await daemon('1h');
      await prometheus.waitFor('license_server_backup_max_age_seconds', (value) => value === HOUR);
      const pending = await waitForRule(prometheus, (rule) => rule.alerts.length > 0);
      // `for: 10m` keeps it pending here; promtool's test above shows it firing after that.
      assert.equal(pending.state, 'pending', JSON.stringify(pending));
      const age = Number(pending.alerts[0]!.value);
      assert.ok(age > 2 * HOUR && age < 3 * HOUR, `the alert's value is the backup's age: ${age} s`);

      // Unset: the daemon exports no max age (prom-client's 0 made every backup stale, so the
      // alert stayed pending here), and the rule's 26 hours hold.
      assert.equal((await serve.stop()).code, 0);
      serve = await daemon(undefined);
      const restartedAt = Date.now();
      await prometheus.waitFor('license_server_store_up', (value) => value === 1);
      const cleared = await waitForRule(prometheus, (rule) => Date.parse(rule.lastEvaluation) > restartedAt + 2000 && rule.alerts.length === 0);
      assert.equal(cleared.state, 'inactive', JSON.stringify(cleared));
    });
  });
});

/** Issue 37, Deliver 4: the restore drill's alert rules, in promtool's rule tests. */
describe('LicenseServerRestoreDrillFailed and LicenseServerRestoreDrillOverdue (docs/prometheus-alerts.yml)', function () {
  this.timeout(60_000);

  it('fire on a failed drill after 5 minutes, and past twice the schedule\'s gap since the last success', function () {
    requirePrometheus(this, PROMTOOL);
    const instance = 'a:9464';
    const failed = { exp_labels: { severity: 'critical', instance }, exp_annotations: {
      summary: `The last restore drill on ${instance} failed`,
      description: 'A restore from its backup or replica may fail or lose writes. The backup.drill_failed event names the part and the check; `license-server backup drill` runs it again and lists every check.',
    } };
    const overdue = (age: string) => ({ exp_labels: { severity: 'warning', instance }, exp_annotations: {
      summary: `No restore drill has passed on ${instance} for ${age}`,
      description: 'Drills stopped, or keep failing. Check backup.drill.enabled and serve\'s log ("restore drill").',
    } });
    const tests = [
      // The newest drill failed from the start: pending for 5 minutes, then firing; a passed one never.
      { interval: '1m', input_series: [{ series: `license_server_restore_drill_last_ok{instance="${instance}"}`, values: '0+0x20' }],
        alert_rule_test: [{ eval_time: '4m', alertname: 'LicenseServerRestoreDrillFailed', exp_alerts: [] }, { eval_time: '6m', alertname: 'LicenseServerRestoreDrillFailed', exp_alerts: [failed] }] },
      { interval: '1m', input_series: [{ series: `license_server_restore_drill_last_ok{instance="${instance}"}`, values: '1+0x20' }],
        alert_rule_test: [{ eval_time: '10m', alertname: 'LicenseServerRestoreDrillFailed', exp_alerts: [] }] },
      // A daily schedule, the last success at time 0: overdue past 2 days, firing 10 minutes later.
      { interval: '1m', input_series: [
        { series: `license_server_restore_drill_last_success_timestamp_seconds{instance="${instance}"}`, values: '0+0x3000' },
        { series: `license_server_restore_drill_interval_seconds{instance="${instance}"}`, values: '86400+0x3000' },
      ], alert_rule_test: [
        { eval_time: '47h', alertname: 'LicenseServerRestoreDrillOverdue', exp_alerts: [] },
        { eval_time: '48h20m', alertname: 'LicenseServerRestoreDrillOverdue', exp_alerts: [overdue('2d 0h 20m 0s')] },
      ] },
      // No schedule exported (drills by cron alone): never.
      { interval: '1m', input_series: [{ series: `license_server_restore_drill_last_success_timestamp_seconds{instance="${instance}"}`, values: '0+0x4000' }],
        alert_rule_test: [{ eval_time: '60h', alertname: 'LicenseServerRestoreDrillOverdue', exp_alerts: [] }] },
    ];
    passRuleTests(tests);
  });
});

/** Issue 37, Deliver 2: PostgreSQL's WAL archiving, in promtool's rule tests. */
describe('LicenseServerWalArchivingFailing and LicenseServerWalArchivingOff (docs/prometheus-alerts.yml)', function () {
  this.timeout(60_000);

  it('fire after 10 minutes failing or stale, and after an hour off; never while ok', function () {
    requirePrometheus(this, PROMTOOL);
    const instance = 'a:9464';
    const series = (state: string, values: string) => ({ series: `license_server_wal_archive_state{instance="${instance}",state="${state}"}`, values });
    const failing = (state: string) => ({ exp_labels: { severity: 'critical', instance, state }, exp_annotations: {
      summary: `WAL archiving on ${instance} is ${state}`,
      description: 'PostgreSQL cannot archive its WAL (archive_command fails), or completed WAL files wait. Writes since the last archived file are on this host only. `license-server backup status` and PostgreSQL\'s log say why; `pgbackrest check` tests the whole path.',
    } });
    const off = { exp_labels: { severity: 'warning', instance }, exp_annotations: {
      summary: `PostgreSQL behind ${instance} archives no WAL`,
      description: 'archive_mode is off, so a lost host loses every write since the last backup, and no point in time can be restored. docs/replication.md ("PostgreSQL") sets up pgBackRest.',
    } };
    const at = (alertname: string, minutes: number, exp_alerts: unknown[]) => ({ eval_time: `${minutes}m`, alertname, exp_alerts });
    const tests = [
      // Failing from the start (ok, stale and off exported as 0 beside it).
      { interval: '1m', input_series: [series('failing', '1+0x30'), series('ok', '0+0x30'), series('stale', '0+0x30'), series('off', '0+0x30')],
        alert_rule_test: [at('LicenseServerWalArchivingFailing', 9, []), at('LicenseServerWalArchivingFailing', 11, [failing('failing')]), at('LicenseServerWalArchivingOff', 30, [])] },
      // Stale for 12 minutes, then ok again: fires, then clears.
      { interval: '1m', input_series: [series('stale', '1+0x12 0+0x10'), series('ok', '0+0x12 1+0x10')],
        alert_rule_test: [at('LicenseServerWalArchivingFailing', 11, [failing('stale')]), at('LicenseServerWalArchivingFailing', 15, [])] },
      { interval: '1m', input_series: [series('ok', '1+0x100'), series('failing', '0+0x100'), series('off', '0+0x100')],
        alert_rule_test: [at('LicenseServerWalArchivingFailing', 90, []), at('LicenseServerWalArchivingOff', 90, [])] },
      { interval: '1m', input_series: [series('off', '1+0x100')],
        alert_rule_test: [at('LicenseServerWalArchivingOff', 59, []), at('LicenseServerWalArchivingOff', 61, [off])] },
    ];
    passRuleTests(tests);
  });
});

/** Runs promtool's rule tests of docs/prometheus-alerts.yml (`tests` as promtool's test file has them) and asserts they pass. */
function passRuleTests(tests: unknown[]): void {
  const dir = mkdtempSync(path.join(tmpdir(), 'license-alert-rules-'));
  try {
    const file = path.join(dir, 'tests.yml');
    // JSON is YAML.
    writeFileSync(file, JSON.stringify({ rule_files: [RULES], evaluation_interval: '1m', tests }, null, 2));
    const result = testRules(file);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /SUCCESS/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

type Rule = Awaited<ReturnType<TestPrometheus['alertRules']>>[number];

/**
 * The rule once `accept` takes it. Bounded by Prometheus's own work, not by seconds: it gives
 * up after `evaluations` evaluations of the rule (one a second, whatever the machine's load).
 */
async function waitForRule(prometheus: TestPrometheus, accept: (rule: Rule) => boolean, evaluations = 15): Promise<Rule> {
  const seen = new Set<string>();
  let last: Rule | undefined;
  while (seen.size <= evaluations) {
    last = (await prometheus.alertRules()).find((candidate) => candidate.name === 'LicenseServerBackupStale');
    if (!last) throw new Error(`Prometheus has no rule LicenseServerBackupStale:\n${prometheus.log()}`);
    if (accept(last)) return last;
    seen.add(last.lastEvaluation);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`after ${evaluations} evaluations of LicenseServerBackupStale: ${JSON.stringify(last)}`);
}
