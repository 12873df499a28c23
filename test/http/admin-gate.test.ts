import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { AdminGate } from '../../src/http/admin-gate.js';

/** Admin reads one at a time, yielding to clients (src/http/admin-gate.ts). */
describe('admin gate', () => {
  /**
   * Two admin reads of `ms` each, queued at once; when the second started after the first
   * ended, and how long the first took as the gate sees it. Node's timers run on libuv's
   * millisecond clock, so a sleep of 30 ms can measure 29.2 ms and the pause computed from it
   * four times that: bounds are taken from the measured time, less 2 ms for the pause's own timer.
   */
  async function gapBetweenTwo(gate: AdminGate, ms: number): Promise<{ gap: number; overlapped: boolean; first: number }> {
    let running = 0;
    let overlapped = false;
    let firstStarted = 0;
    let firstEnded = 0;
    let secondStarted = 0;
    const read = (mark: 'first' | 'second') => gate.admin(async () => {
      running += 1;
      overlapped ||= running > 1;
      if (mark === 'first') firstStarted = performance.now();
      if (mark === 'second') secondStarted = performance.now();
      await sleep(ms);
      if (mark === 'first') firstEnded = performance.now();
      running -= 1;
    });
    await Promise.all([read('first'), read('second')]);
    return { gap: secondStarted - firstEnded, overlapped, first: firstEnded - firstStarted };
  }

  it('runs admin reads one at a time, back to back when no client is being served', async () => {
    const { gap, overlapped } = await gapBetweenTwo(new AdminGate(4, 20), 30);
    assert.equal(overlapped, false);
    // No pause of 4 x 30 ms: the next read starts at once (the bound leaves room for a busy machine).
    assert.ok(gap < 100, `gap ${gap} ms`);
  });

  it('leaves clients four times the time of each admin read while they are served', async () => {
    const gate = new AdminGate(4, 20);
    const done = gate.client();
    const { gap, overlapped, first } = await gapBetweenTwo(gate, 30);
    done();
    assert.equal(overlapped, false);
    assert.ok(first >= 28, `the first read took ${first} ms`);
    assert.ok(gap >= 4 * first - 2, `gap ${gap} ms after a read of ${first} ms`);
  });

  it('stops the pause at its cap, so one slow read does not hold operators for four times its length', async () => {
    const gate = new AdminGate(4, 20, 40);
    const done = gate.client();
    const { gap } = await gapBetweenTwo(gate, 150);
    done();
    assert.ok(gap >= 40 - 2, `gap ${gap} ms`);
    assert.ok(gap < 4 * 150, `gap ${gap} ms: the uncapped pause`);
  });
});
