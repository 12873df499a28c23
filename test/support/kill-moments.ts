import { randomInt } from 'node:crypto';

/** The seed of a randomised fault run: FAULT_SEED when set, so that a failing run can be repeated. */
export function faultSeed(): number {
  return Number(process.env.FAULT_SEED ?? randomInt(2 ** 31));
}

/**
 * How long `operation` takes here and now, run to its end `runs` times: the quickest, as a
 * busy machine makes one run now and then much slower. Kill moments are picked within this
 * span, so that they land in every phase of the operation however fast the machine is; fixed
 * delays chosen on a quiet machine all land before the end on a busy one.
 */
export async function measuredSpan(operation: () => Promise<unknown>, runs = 2): Promise<number> {
  let span = Infinity;
  for (let run = 0; run < runs; run += 1) {
    const started = performance.now();
    await operation();
    span = Math.min(span, performance.now() - started);
  }
  return Math.round(span);
}

/**
 * `count` kill delays, one in each of `count` equal slices of [low, span x margin], in shuffled
 * order: random moments, yet every phase of the operation gets its share whatever the seed.
 * The margin past the measured span is for a machine that gets busier than it was while the
 * span was measured (a kill after the end only finds the operation finished).
 */
export function spreadOver(span: number, count: number, rng: () => number, { low = 0, margin = 1.35 } = {}): number[] {
  const high = Math.max(low + 1, span * margin);
  const delays = Array.from({ length: count }, (_, i) => Math.round(low + ((i + rng()) * (high - low)) / count));
  for (let i = delays.length - 1; i > 0; i -= 1) {
    const j = Math.floor(rng() * (i + 1));
    [delays[i], delays[j]] = [delays[j]!, delays[i]!];
  }
  return delays;
}
