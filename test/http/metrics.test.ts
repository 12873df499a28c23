import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DaemonMetrics, validationOutcome, VALIDATION_OUTCOMES } from '../../src/http/metrics.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import { INVALID_REASONS } from '../../src/lib/licensing/online-validation.js';
import { ok, runCli } from '../support/cli.js';
import { checkRules, PROMTOOL, requirePrometheus } from '../support/prometheus.js';
import { api, rawRequest, startServe, type ServeProcess } from '../support/serve.js';

/** Series of the text format: `name{labels} value` lines, by metric name (histograms by their base name). */
function seriesOf(text: string): Map<string, string[]> {
  const series = new Map<string, string[]>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)![0];
    const labels = /\{(.*)\}/.exec(line)?.[1] ?? '';
    series.set(name, [...(series.get(name) ?? []), labels]);
  }
  return series;
}

function valueOf(text: string, name: string, labels = ''): number | undefined {
  const line = text.split('\n').find((candidate) => candidate.startsWith(labels ? `${name}{${labels}} ` : `${name} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

describe('metrics: the outcome of a validation', () => {
  it('maps every refusal of POST /api/v1/validate to one of the documented outcomes', () => {
    const expected: Record<(typeof INVALID_REASONS)[number], string> = {
      LICENSE_NOT_FOUND: 'not_found',
      LICENSE_INACTIVE: 'revoked',
      CUSTOMER_INACTIVE: 'revoked',
      LICENSE_EXPIRED: 'expired',
      LICENSE_NOT_YET_VALID: 'not_yet_valid',
      MACHINE_LIMIT_EXCEEDED: 'machine_limit',
      MACHINE_DEACTIVATED: 'deactivated',
    };
    for (const reason of INVALID_REASONS) assert.equal(validationOutcome({ answer: { valid: false, reason } }), expected[reason], reason);
    assert.equal(validationOutcome({ answer: { valid: true } }), 'valid');
  });

  it('maps errors: hardware mismatch and not found by code, other 4xx as invalid_request, the rest as error', () => {
    assert.equal(validationOutcome({ error: new LicenseServerError('HARDWARE_MISMATCH', 'x') }), 'hardware_mismatch');
    assert.equal(validationOutcome({ error: new LicenseServerError('LICENSE_NOT_FOUND', 'x') }), 'not_found');
    assert.equal(validationOutcome({ error: new LicenseServerError('INVALID_HARDWARE_ID', 'x') }), 'invalid_request');
    assert.equal(validationOutcome({ error: new LicenseServerError('INVALID_INPUT', 'x') }), 'invalid_request');
    assert.equal(validationOutcome({ error: new LicenseServerError('DATABASE_UNAVAILABLE', 'x') }), 'error');
    assert.equal(validationOutcome({ error: new TypeError('a bug') }), 'error');
  });

  it('starts every outcome at 0, so that there is a series before the first one', async () => {
    const text = await new DaemonMetrics().render();
    for (const outcome of VALIDATION_OUTCOMES) assert.equal(valueOf(text, 'license_server_validations_total', `outcome="${outcome}"`), 0, outcome);
  });
});

/** About this process's reading of the store, not the store: each daemon has its own. */
const PER_PROCESS_STORE_GAUGES = ['license_server_store_up', 'license_server_store_figures_age_seconds', 'license_server_store_read_duration_seconds'];

describe('docs/metrics.md and docs/prometheus-alerts.yml', () => {
  const doc = readFileSync(new URL('../../docs/metrics.md', import.meta.url), 'utf8');

  it('documents every metric of the daemon\'s own, and none it does not have', () => {
    const names = new DaemonMetrics().registry.getMetricsAsArray().map((metric) => metric.name).sort();
    const documented = [...doc.matchAll(/^\| `(license_server_[a-z_]+)` \|/gm)].map((match) => match[1]!).sort();
    assert.deepEqual(documented, names);
  });

  it('says of every store figure in its HELP that it describes the shared database', () => {
    for (const metric of new DaemonMetrics().registry.getMetricsAsArray()) {
      if (!metric.name.startsWith('license_server_store_') || PER_PROCESS_STORE_GAUGES.includes(metric.name)) continue;
      assert.match((metric as unknown as { help: string }).help, /shared database.*max, not sum/, metric.name);
    }
  });

  it('exports no value for a gauge whose HELP says it is absent, before it has one (prom-client shows 0, which alert rules read as a value)', async () => {
    const metrics = new DaemonMetrics();
    const text = await metrics.render();
    const valued = seriesOf(text);
    const absentButShown = metrics.registry
      .getMetricsAsArray()
      .filter((metric) => /\bAbsent (when|until|before)\b/.test((metric as unknown as { help: string }).help))
      .map((metric) => metric.name)
      .filter((name) => valued.has(name));
    assert.deepEqual(absentButShown, []);
  });

  it('passes promtool check rules', function () {
    requirePrometheus(this, PROMTOOL);
    const file = new URL('../../docs/prometheus-alerts.yml', import.meta.url).pathname;
    const result = checkRules(file);
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, /SUCCESS: 12 rules found/);
  });

  it('names in its alert rules only metrics the daemon has', () => {
    const rules = readFileSync(new URL('../../docs/prometheus-alerts.yml', import.meta.url), 'utf8');
    const known = new Set(new DaemonMetrics().registry.getMetricsAsArray().map((metric) => metric.name));
    const used = [...rules.matchAll(/\b(license_server_[a-z_]*[a-z])\b/g)].map((match) => match[1]!.replace(/_(bucket|sum|count)$/, ''));
    assert.deepEqual(used.filter((name) => !known.has(name)), []);
  });
});

describe('GET /metrics on a running daemon', function () {
  this.timeout(60_000);
  let dir: string;
  let serve: ServeProcess;
  let metricsUrl: string;
  const tokens = { read: '', metrics: '' };

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-metrics-'));
    const env = { LICENSE_DATA_DIR: path.join(dir, 'data') };
    serve = await startServe({ ...env, LICENSE_METRICS_PORT: '0', LICENSE_CLIENT_RATE_LIMIT: '1', LICENSE_CLIENT_RATE_BURST: '3', LICENSE_METRICS_STORE_REFRESH: '1' });
    metricsUrl = /metrics listening on (http:\/\/\S+\/metrics)/.exec(serve.stdout())![1]!;
    for (const scope of ['read', 'metrics'] as const) {
      tokens[scope] = ok(await runCli(['token', 'create', '--name', `t-${scope}`, '--scope', scope, '--json'], { env })).json().token;
    }
  });
  after(async () => {
    if (serve) assert.equal((await serve.stop()).code, 0);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Scrapes the separate listener until `accept` takes the text (bounded by the suite's timeout). */
  async function scrapeUntil(accept: (text: string) => boolean): Promise<string> {
    for (;;) {
      const text = await (await fetch(metricsUrl)).text();
      if (accept(text)) return text;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  it('on the main listener: 401 without a token, 403 TOKEN_SCOPE with read, 200 with metrics or admin', async () => {
    const none = await api(serve.url, 'GET', '/metrics');
    assert.equal(none.status, 401);
    const read = await api(serve.url, 'GET', '/metrics', { token: tokens.read });
    assert.equal(read.status, 403);
    assert.equal(read.body.error.code, 'TOKEN_SCOPE');
    for (const token of [tokens.metrics, serve.token!]) {
      const answer = await api(serve.url, 'GET', '/metrics', { token });
      assert.equal(answer.status, 200, answer.text);
      assert.equal(answer.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
      assert.match(answer.text, /^# HELP license_server_/m);
      assert.match(answer.text, /^process_cpu_seconds_total /m, 'the process metrics');
    }
    // The scope opens /metrics and nothing else.
    const other = await api(serve.url, 'GET', '/api/licenses', { token: tokens.metrics });
    assert.equal(other.status, 403);
    assert.equal(other.body.error.code, 'TOKEN_SCOPE');
  });

  it('the separate listener serves /metrics without a token, and nothing else', async () => {
    const answer = await fetch(metricsUrl);
    assert.equal(answer.status, 200);
    assert.match(await answer.text(), /^license_server_store_up [01]$/m);
    await scrapeUntil((text) => valueOf(text, 'license_server_store_up') === 1);
    const base = metricsUrl.slice(0, -'/metrics'.length);
    for (const route of ['/', '/healthz', '/api/licenses', '/api/whoami', '/metrics/', '/metrics/x', '/admin/']) {
      const other = await rawRequest(base, 'GET', route, { headers: { authorization: `Bearer ${serve.token}` }, notTheApi: true });
      assert.equal(other.status, 404, route);
      assert.equal(other.body.error.code, 'ROUTE_NOT_FOUND', route);
      assert.equal(other.body.error.request_id, other.headers['x-request-id'], route);
    }
    const post = await rawRequest(base, 'POST', '/metrics', { notTheApi: true });
    assert.equal(post.status, 405);
    assert.equal(post.headers.allow, 'GET, HEAD');
  });

  it('keeps the series bounded: 200 distinct raw paths are one series of their route template', async () => {
    for (let i = 0; i < 200; i += 1) {
      await rawRequest(serve.url, 'GET', `/no/such/path-${i}?q=${i}`);
      await rawRequest(serve.url, 'GET', `/api/licenses/00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, { headers: { authorization: `Bearer ${serve.token}` } });
    }
    const text = await (await fetch(metricsUrl)).text();
    assert.equal(valueOf(text, 'license_server_http_requests_total', 'route="unmatched",status="404"'), 200);
    assert.equal(valueOf(text, 'license_server_http_requests_total', 'route="GET /api/licenses/:id",status="404"'), 200);
    const series = seriesOf(text);
    const routes = new Set(series.get('license_server_http_requests_total')!.map((labels) => /route="([^"]*)"/.exec(labels)![1]));
    assert.ok(![...routes].some((route) => /path-|0000/.test(route!)), [...routes].join('\n'));
    assert.equal(series.get('license_server_http_request_duration_seconds_count')!.filter((labels) => labels.includes('unmatched')).length, 1);
    assert.doesNotMatch(text, /path-\d|00000000-0000/);
  });

  it('counts validations by outcome, usage reports and rate-limited requests', async () => {
    const customer = await api(serve.url, 'POST', '/api/customers', { token: serve.token, body: { name: 'Initech' } });
    const license = await api(serve.url, 'POST', '/api/licenses', { token: serve.token, body: { customer_id: customer.body.id, type: 'hybrid', valid_until: '2099-12-31', max_machines: 1 } });
    const validate = (hardware: string) => api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: license.body.key, hardware_id: hardware, version: '1.0.0' } });
    assert.equal((await validate('HW-1')).body.valid, true);
    assert.equal((await validate('HW-2')).body.reason, 'MACHINE_LIMIT_EXCEEDED');
    assert.equal((await api(serve.url, 'POST', '/api/v1/validate', { body: { license_key: 'LS-NOPE', hardware_id: 'HW-1', version: '1' } })).body.reason, 'LICENSE_NOT_FOUND');
    // The burst is 3: the next client request from this address is refused.
    let limited = 0;
    for (let i = 0; i < 3 && limited === 0; i += 1) if ((await validate('HW-1')).status === 429) limited += 1;
    assert.equal(limited, 1);
    // The store's figures come from a background read, every second here (server.metrics_store_refresh).
    const text = await scrapeUntil((scraped) => valueOf(scraped, 'license_server_store_seats_in_use') === 1);
    assert.equal(valueOf(text, 'license_server_validations_total', 'outcome="valid"'), 1);
    assert.equal(valueOf(text, 'license_server_validations_total', 'outcome="machine_limit"'), 1);
    assert.equal(valueOf(text, 'license_server_validations_total', 'outcome="not_found"'), 1);
    assert.equal(valueOf(text, 'license_server_rate_limited_total', 'route="POST /api/v1/validate"'), 1);
    assert.equal(valueOf(text, 'license_server_store_licenses_near_machine_limit'), 1);
    assert.equal(valueOf(text, 'license_server_store_seats_in_use'), 1);
  });
});
