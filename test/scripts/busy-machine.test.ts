import assert from 'node:assert/strict';
import { busyFactor } from '../support/busy-machine.js';

describe('time limits on a busy machine (test/support/busy-machine.ts)', () => {
  it('stretch a limit a test sets from inside its own body by the load, as the declared ones', function () {
    const before = busyFactor();
    this.timeout(10_000);
    const after = busyFactor();
    // The load average moves every 5 s: the factor read on either side of the call.
    assert.ok([Math.round(10_000 * before), Math.round(10_000 * after)].includes(this.timeout()), `limit ${this.timeout()} ms at factors ${before} and ${after}`);
  });

  it('leave "no limit" (0) as it is', function () {
    this.timeout(0);
    assert.equal(this.timeout(), 0);
  });
});
