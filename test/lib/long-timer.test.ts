import assert from 'node:assert/strict';
import { MAX_TIMER_DELAY_MS, setLongTimeout, setTimerUntil } from '../../src/lib/long-timer.js';
import { FakeClock } from '../support/fake-clock.js';

const DAY = 86_400_000;

describe('timers longer than setTimeout holds (src/lib/long-timer.ts)', () => {
  it('setTimerUntil reaches a deadline a year away in timers of at most 2^31-1 ms, and fires once, at it', () => {
    const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
    const deadline = clock.now().getTime() + 365 * DAY;
    let fired = 0;
    setTimerUntil(clock, deadline, () => (fired += 1));
    assert.deepEqual(clock.pending(), [MAX_TIMER_DELAY_MS]);
    clock.advance(365 * DAY - 1);
    assert.equal(fired, 0);
    clock.advance(1);
    assert.equal(fired, 1);
    clock.advance(365 * DAY);
    assert.equal(fired, 1);
    assert.deepEqual(clock.overflows, []);
  });

  it('setTimerUntil re-reads the clock at each hop: a clock set back waits longer, one set forward less', () => {
    const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
    let fired = 0;
    setTimerUntil(clock, clock.now().getTime() + 40 * DAY, () => (fired += 1));
    clock.set(new Date(clock.now().getTime() - 10 * DAY));
    clock.advance(MAX_TIMER_DELAY_MS);
    assert.equal(fired, 0, 'the first hop ends, the deadline is still ahead');
    clock.set(new Date(clock.now().getTime() + 100 * DAY));
    clock.advance(MAX_TIMER_DELAY_MS);
    assert.equal(fired, 1, 'the next hop finds the deadline passed');
  });

  it('setLongTimeout counts elapsed time, whatever the wall clock says', () => {
    const clock = new FakeClock(new Date('2026-01-01T00:00:00Z'));
    let fired = 0;
    setLongTimeout(clock, 60 * DAY, () => (fired += 1));
    clock.set(new Date('2020-01-01T00:00:00Z'));
    clock.advance(60 * DAY - 1);
    assert.equal(fired, 0);
    clock.advance(1);
    assert.equal(fired, 1);
    assert.deepEqual(clock.overflows, []);
  });

  it('cancel() stops the chain at any hop', () => {
    const clock = new FakeClock();
    let fired = 0;
    const timer = setLongTimeout(clock, 100 * DAY, () => (fired += 1));
    clock.advance(30 * DAY);
    timer.cancel();
    assert.deepEqual(clock.pending(), []);
    clock.advance(100 * DAY);
    assert.equal(fired, 0);
  });
});
