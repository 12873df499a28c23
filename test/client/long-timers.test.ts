import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { eventually, FakeClock, NODE_MAX_TIMER_DELAY_MS } from '../support/fake-clock.js';
import { collectWarnings, CountingProxy, LicenseFixture } from '../support/license-fixture.js';

const HOUR = 3_600_000;
const DAY = 24 * HOUR;
const VALIDATE = '/api/v1/validate';

/** Real time during which a timer that overflowed would have fired hundreds of times. */
const quietly = () => new Promise((resolve) => setTimeout(resolve, 2000));

describe('client timers beyond 2^31-1 ms, against a serve with grace.hours 8760', function () {
  this.timeout(60_000);
  let fixture: LicenseFixture;
  let proxy: CountingProxy;
  let warnings: ReturnType<typeof collectWarnings>;

  before(async () => {
    fixture = await LicenseFixture.start({ LICENSE_GRACE_HOURS: '8760' });
    proxy = await CountingProxy.start(() => fixture.serve!.url);
  });
  beforeEach(() => {
    proxy.requests.length = 0;
    proxy.failing = false;
    warnings = collectWarnings('TimeoutOverflowWarning');
  });
  afterEach(() => {
    warnings.stop();
    fixture.closeClients();
  });
  after(async () => {
    await proxy.close();
    await fixture.cleanup();
  });

  const cacheDir = (name: string) => path.join(fixture.work, name);
  const graceExp = (dir: string) => {
    const token = JSON.parse(readFileSync(path.join(dir, readdirSync(dir)[0]!, 'grace.json'), 'utf8')).token as string;
    return JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()).exp * 1000;
  };

  it('answers from a year-long grace token while the server fails, without a request storm or a TimeoutOverflowWarning', async () => {
    const c = fixture.client({ serverAddr: proxy.addr, offline: { cacheDir: cacheDir('storm'), licenseFile: path.join(fixture.work, 'missing.lic') } });
    assert.equal((await c.validate()).source, 'online');
    assert.ok(graceExp(cacheDir('storm')) - Date.now() > 8759 * HOUR, 'the server issued a year-long grace token');
    proxy.failing = true;
    const offline = await c.validate();
    assert.equal(offline.valid, true);
    assert.equal(offline.source, 'grace-token');
    await quietly();
    assert.equal(proxy.count(VALIDATE), 2, `one request per validate(), then nothing until the first retry in 30 s: ${proxy.requests.length} requests`);
    assert.deepEqual(warnings.seen, []);
  });

  it('waits a retry interval beyond 24.8 days instead of retrying at once', async () => {
    const c = fixture.client({ serverAddr: proxy.addr, offline: { cacheDir: cacheDir('retry'), retryInterval: 30 * DAY, maxRetryInterval: 90 * DAY } });
    proxy.failing = true;
    const result = await c.validate();
    assert.equal(result.source, 'license-file');
    await quietly();
    assert.equal(proxy.count(VALIDATE), 1, `no retry within seconds of a 30-day interval: ${proxy.requests.length} requests`);
    assert.deepEqual(warnings.seen, []);
  });

  it('retries after exactly the long interval with a fake clock, in hops of at most 2^31-1 ms', async () => {
    const clock = new FakeClock();
    const c = fixture.client({ clock, serverAddr: proxy.addr, offline: { cacheDir: cacheDir('retry-fake'), retryInterval: 30 * DAY, maxRetryInterval: 90 * DAY } });
    proxy.failing = true;
    await c.validate();
    clock.advance(30 * DAY - 1000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(proxy.count(VALIDATE), 1, 'not retried before 30 days');
    clock.advance(1000);
    await eventually(() => proxy.count(VALIDATE) === 2, 'the retry at 30 days');
    await eventually(() => clock.pending().length > 0, 'the next retry is scheduled');
    clock.advance(60 * DAY - 1000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(proxy.count(VALIDATE), 2, 'the second retry waits the doubled interval');
    clock.advance(1000);
    await eventually(() => proxy.count(VALIDATE) === 3, 'the retry at 30 + 60 days');
    assert.deepEqual(clock.overflows, [], 'no timer longer than Node holds');
  });

  it('fires the grace expiry of a year-long token at its exp with a fake clock, and not before', async () => {
    const clock = new FakeClock();
    let expired = 0;
    const dir = cacheDir('expiry');
    const c = fixture.client({
      clock,
      serverAddr: proxy.addr,
      // The first retry would come after the token's end: the expiry is the only timer that matters.
      offline: { cacheDir: dir, licenseFile: path.join(fixture.work, 'missing.lic'), retryInterval: 400 * DAY, maxRetryInterval: 400 * DAY },
      onGracePeriodExpired: () => (expired += 1),
    });
    assert.equal((await c.validate()).source, 'online');
    const exp = graceExp(dir);
    proxy.failing = true;
    assert.equal((await c.validate()).source, 'grace-token');
    clock.advance(exp - clock.now().getTime() - 1000);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(expired, 0, 'a second before exp the token still holds');
    assert.equal(proxy.count(VALIDATE), 2, 'and no validation ran early');
    clock.advance(1000);
    await eventually(() => expired === 1, 'the grace period expired at exp');
    assert.equal(proxy.count(VALIDATE), 3, 'the chain ran once more at exp');
    assert.deepEqual(clock.overflows, [], 'no timer longer than Node holds');
    assert.ok(clock.pending().every((ms) => ms <= NODE_MAX_TIMER_DELAY_MS));
  });
});
