import assert from 'node:assert/strict';
import { LicenseServerError } from '../../../src/lib/errors.js';
import { WriteRefusals } from '../../../src/lib/storage/write-refusals.js';

/**
 * The readiness rule of issue 35, item 8 (docs/http-api.md, "GET /readyz"): no write while
 * none was refused; after one, a probe write when asked, at most one a second. The real
 * probes, on a real full disk, are test/http/disk-full.test.ts.
 */
describe('write refusals (what /readyz knows of the store taking writes)', () => {
  const full = () => new LicenseServerError('DATABASE_DISK_FULL', 'no room');
  let clock = 0;
  let probes = 0;
  let answer: () => Promise<void>;
  const refusals = () => new WriteRefusals(() => {
    probes += 1;
    return answer();
  }, () => clock);
  beforeEach(() => {
    clock = 1_000_000;
    probes = 0;
    answer = async () => undefined;
  });

  it('probe nothing while no write was refused, whatever else failed', async () => {
    const writes = refusals();
    writes.note(new LicenseServerError('DATABASE_UNAVAILABLE', 'gone'));
    writes.note(new Error('a bug'));
    for (let i = 0; i < 5; i += 1) await writes.check();
    assert.equal(probes, 0);
  });

  it('after a refused write, probe when asked, at most once a second, until a probe goes through', async () => {
    const writes = refusals();
    const refused = full();
    assert.equal(writes.note(refused), refused);
    answer = async () => {
      throw full();
    };
    await assert.rejects(writes.check(), { code: 'DATABASE_DISK_FULL' });
    await assert.rejects(writes.check(), { code: 'DATABASE_DISK_FULL' });
    clock += 999;
    await assert.rejects(writes.check(), { code: 'DATABASE_DISK_FULL' });
    assert.equal(probes, 1, 'one probe within the second');
    clock += 1;
    answer = async () => undefined;
    await writes.check();
    await writes.check();
    assert.equal(probes, 2, 'ready again, and no more probes');
  });

  it('share one probe among the checks that come while it runs', async () => {
    const writes = refusals();
    writes.note(full());
    let finish!: () => void;
    answer = () => new Promise<void>((resolve) => (finish = resolve));
    const checks = [writes.check(), writes.check(), writes.check()];
    finish();
    await Promise.all(checks);
    assert.equal(probes, 1);
  });

  it('stay unready when the store cannot be reached; forget the refusal when the probe fails for a reason that says nothing of space', async () => {
    const writes = refusals();
    writes.note(full());
    answer = async () => {
      throw new LicenseServerError('DATABASE_UNAVAILABLE', 'gone');
    };
    await assert.rejects(writes.check(), { code: 'DATABASE_UNAVAILABLE' });
    await assert.rejects(writes.check(), { code: 'DATABASE_DISK_FULL' }, 'the refusal stands between probes');
    clock += 1000;
    answer = async () => {
      throw Object.assign(new Error('permission denied to create temporary tables'), { code: '42501' });
    };
    await writes.check();
    await writes.check();
    assert.equal(probes, 2);
  });
});
