import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { requirePrometheus, startPrometheus, type TestPrometheus } from '../support/prometheus.js';
import { api, startServe, type ServeProcess } from '../support/serve.js';

/**
 * Issue 27's "done when": a real Prometheus (Debian's) scrapes a real daemon every second, and
 * what the test reads back through Prometheus's query API is the backup the daemon made (its
 * time, to the millisecond) and the validation it answered. Once through each way in
 * (docs/metrics.md, "Access"): the main listener with a token of scope `metrics`, and the
 * listener of server.metrics_port without one.
 */
describe('Prometheus scrapes the daemon and reads back its figures', function () {
  this.timeout(90_000);

  const ways = [
    { name: 'the main listener, with a token of scope metrics', separate: false },
    { name: 'the separate metrics listener, without a token', separate: true },
  ];
  for (const way of ways) {
    describe(way.name, () => {
      let dir: string;
      let serve: ServeProcess | undefined;
      let prometheus: TestPrometheus | undefined;

      before(function () {
        requirePrometheus(this);
        dir = mkdtempSync(path.join(tmpdir(), 'license-prometheus-serve-'));
      });
      after(async () => {
        await prometheus?.stop();
        if (serve) assert.equal((await serve.stop()).code, 0);
        if (dir) rmSync(dir, { recursive: true, force: true });
      });

      it('reads back the backup\'s time and the validation counter', async () => {
        // The store's figures are read in the background: every second here (docs/metrics.md).
        const env = { LICENSE_DATA_DIR: path.join(dir, 'data'), LICENSE_METRICS_STORE_REFRESH: '1', ...(way.separate ? { LICENSE_METRICS_PORT: '0' } : {}) };
        serve = await startServe(env);
        const admin = serve.token!;
        let target: { address: string; credentials?: string };
        if (way.separate) {
          const url = /metrics listening on (http:\/\/\S+)\/metrics/.exec(serve.stdout())?.[1];
          assert.ok(url, `no metrics listener in the banner:\n${serve.stdout()}`);
          target = { address: new URL(url).host };
        } else {
          const token = ok(await runCli(['token', 'create', '--name', 'prometheus', '--scope', 'metrics', '--json'], { env: { LICENSE_DATA_DIR: env.LICENSE_DATA_DIR } })).json().token as string;
          target = { address: new URL(serve.url).host, credentials: token };
        }

        const customer = await api(serve.url, 'POST', '/api/customers', { token: admin, body: { name: 'Initech' } });
        const license = await api(serve.url, 'POST', '/api/licenses', { token: admin, body: { customer_id: customer.body.id, type: 'hybrid', valid_until: '2099-12-31' } });
        assert.equal(license.status, 201, license.text);
        const validation = await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.body.key, hardware_id: 'HW-PROM-1', version: '1.0.0' } });
        assert.equal(validation.body?.valid, true, validation.text);
        const backup = await api(serve.url, 'POST', '/api/backups', { token: admin });
        assert.equal(backup.status, 201, backup.text);
        const backupTime = Date.parse(backup.body.created_at) / 1000;

        prometheus = await startPrometheus([target]);
        const seen = await prometheus.waitFor('license_server_store_backup_last_success_timestamp_seconds{trigger="manual"}', (value) => value > 0);
        // Prometheus keeps float64 seconds: the millisecond of created_at survives.
        assert.equal(Math.round(seen * 1000), Math.round(backupTime * 1000), `the backup was made at ${backup.body.created_at}, Prometheus says ${new Date(seen * 1000).toISOString()}`);
        assert.equal(await prometheus.waitFor('license_server_validations_total{outcome="valid"}', (value) => value >= 1), 1);
        // The figures are this daemon's: nothing else was counted.
        const outcomes = await prometheus.query('sum by (outcome) (license_server_validations_total)');
        assert.deepEqual(outcomes.filter((series) => series.value !== 0).map((series) => series.metric.outcome), ['valid']);
        assert.equal(await prometheus.waitFor('license_server_store_machines{state="active"}', (value) => value === 1), 1);
      });
    });
  }
});
