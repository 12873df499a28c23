import assert from 'node:assert/strict';
import { READ_SPACING, STALE_AFTER_INTERVALS, StoreFiguresCache, waitAfterRead } from '../../../src/lib/metrics/store-figures-cache.js';
import type { StoreFigures } from '../../../src/lib/metrics/store-figures.js';

const FIGURES = { seatsInUse: 7 } as unknown as StoreFigures;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function until(probe: () => boolean): Promise<void> {
  // Bounded by the suite's timeout.
  while (!probe()) await sleep(5);
}

/**
 * Runs the cache with reads of about `readMs` until `count` reads happened; names each read
 * that began sooner after the one before than READ_SPACING times that read's length, as the
 * read measures itself (the cache measures a little longer, so no tolerance is needed).
 */
async function readsStartedEarly(readMs: number, count: number): Promise<string[]> {
  const reads: Array<{ start: number; end: number }> = [];
  const cache = new StoreFiguresCache({
    read: async () => {
      const start = performance.now();
      await sleep(readMs);
      reads.push({ start, end: performance.now() });
      return FIGURES;
    },
    intervalMs: () => 1,
    clock: () => new Date(),
  });
  cache.start();
  try {
    await until(() => reads.length >= count);
  } finally {
    cache.close();
  }
  return reads.slice(1).flatMap((read, i) => {
    const previous = reads[i]!;
    const gap = read.start - previous.end;
    return gap >= READ_SPACING * (previous.end - previous.start) ? [] : [`read ${i + 1} started ${gap.toFixed(3)} ms after a read of ${(previous.end - previous.start).toFixed(3)} ms`];
  });
}

describe('metrics: the background read of the store\'s figures (store-figures-cache.ts)', () => {
  it('waits the interval after a quick read, and 19 times the read after a slow one', () => {
    assert.equal(waitAfterRead(30_000, 200), 30_000);
    assert.equal(waitAfterRead(30_000, 2_000), 38_000);
    assert.equal(READ_SPACING * 2_000, 38_000);
  });

  it('spaces slow reads so that reading takes at most 5 % of the time', async () => {
    assert.deepEqual(await readsStartedEarly(20, 3), []);
  });

  it('never starts a read early: 60 reads, each gap at least 19 times the read before it, to the microsecond', async () => {
    // A timer fires up to about 1.6 ms before its delay by performance.now() (Node counts the
    // loop's whole milliseconds): CI under load saw a read start 388.6 ms after one of 20.5 ms.
    assert.deepEqual(await readsStartedEarly(1, 60), []);
  });

  it('keeps the last good figures when a read fails, says so, and is fresh again after a good read', async () => {
    let failing = false;
    let reads = 0;
    const errors: unknown[] = [];
    const cache = new StoreFiguresCache({
      read: async () => {
        reads += 1;
        if (failing) throw new Error('the database is down');
        return FIGURES;
      },
      intervalMs: () => 1,
      clock: () => new Date(),
      onError: (error) => errors.push(error),
    });
    cache.start();
    try {
      await until(() => cache.fresh());
      failing = true;
      await until(() => errors.length > 0);
      assert.equal(cache.fresh(), false);
      assert.equal(cache.snapshot().failed, true);
      assert.equal(cache.snapshot().figures, FIGURES);
      assert.match(String(errors[0]), /the database is down/);
      failing = false;
      const before = reads;
      await until(() => reads > before && cache.fresh());
    } finally {
      cache.close();
    }
  });

  it('is stale past three intervals without a new read, as when a read hangs', async () => {
    let time = Date.parse('2026-01-01T00:00:00.000Z');
    const interval = 60_000;
    // The fake clock moves; the next real read is a minute away, far past this test.
    const cache = new StoreFiguresCache({ read: async () => FIGURES, intervalMs: () => interval, clock: () => new Date(time) });
    cache.start();
    try {
      await until(() => cache.fresh());
      time += STALE_AFTER_INTERVALS * interval;
      assert.equal(cache.ageSeconds(), (STALE_AFTER_INTERVALS * interval) / 1000);
      assert.equal(cache.fresh(), true);
      time += 1;
      assert.equal(cache.fresh(), false);
      assert.equal(cache.snapshot().figures, FIGURES);
    } finally {
      cache.close();
    }
  });
});
