import { availableParallelism, loadavg } from 'node:os';
import Mocha from 'mocha';

/**
 * How much slower than an idle machine this one runs now: the load average over the last
 * minute per core, at least 1. A test's time limit guards against a hang, not a slow
 * machine: on a machine kept at load 8-15 by other work, a 2-core runner gives each process
 * a fraction of a core, and a limit fixed in seconds fails tests that are merely waiting for
 * their turn. Limits that must hold on such a machine are multiplied by this factor.
 */
export function busyFactor(): number {
  const perCore = loadavg()[0]! / availableParallelism();
  return Math.min(MAX_FACTOR, Math.max(1, perCore));
}

/** A hang still ends the run: at load 16 per core a limit of 30 s is 4 minutes, not more. */
const MAX_FACTOR = 8;

/** `ms` stretched by the machine's current busyness. */
export function scaledMs(ms: number): number {
  return Math.round(ms * busyFactor());
}

interface Timed {
  timeout(): number;
  timeout(ms: number): unknown;
}
interface SuiteTree {
  readonly tests: Timed[];
  readonly suites: SuiteTree[];
  readonly _beforeAll?: Timed[];
  readonly _beforeEach?: Timed[];
  readonly _afterEach?: Timed[];
  readonly _afterAll?: Timed[];
}

const baseTimeout = new WeakMap<Timed, number>();

/** Sets a runnable's limit to its declared one times the factor; a limit of 0 (none) stays. */
function stretch(runnable: Timed, factor: number): void {
  if (!baseTimeout.has(runnable)) baseTimeout.set(runnable, runnable.timeout());
  const base = baseTimeout.get(runnable)!;
  if (base > 0) runnable.timeout(Math.round(base * factor));
}

function stretchTree(suite: SuiteTree, factor: number): void {
  for (const hooks of [suite._beforeAll, suite._beforeEach, suite._afterEach, suite._afterAll]) for (const hook of hooks ?? []) stretch(hook, factor);
  for (const test of suite.tests) stretch(test, factor);
  for (const child of suite.suites) stretchTree(child, factor);
}

/**
 * Mocha root hooks (loaded from .mocharc.json): every hook and test limit is stretched by the
 * load when the run starts, and each test's again by the load just before it runs.
 */
export const mochaHooks = {
  beforeAll(this: Mocha.Context): void {
    let root = this.test?.parent as unknown as (SuiteTree & { parent?: unknown }) | undefined;
    while (root && (root as { parent?: unknown }).parent) root = (root as { parent: SuiteTree & { parent?: unknown } }).parent;
    if (root) stretchTree(root, busyFactor());
  },
  beforeEach(this: Mocha.Context): void {
    if (this.currentTest) stretch(this.currentTest as unknown as Timed, busyFactor());
  },
};

/**
 * A limit a test sets from inside its own body (`this.timeout(60_000)`) replaces the one the
 * root hooks stretched, so it is stretched here too: CI once failed a 29 s test on its
 * 60 s limit while two cores ran five suites at load 9.
 */
// Once per process: .mocharc.json loads this module and the tests import it, which can make
// two instances of it (CI stretched a limit by the factor squared).
const STRETCHED = Symbol.for('license-server:busy-machine:in-body-timeouts');
const context = Mocha.Context.prototype as unknown as Record<symbol, boolean> & { timeout: (this: Mocha.Context, ms?: number | string) => unknown };
if (!context[STRETCHED]) {
  context[STRETCHED] = true;
  const setTimeoutOf = context.timeout;
  context.timeout = function (this: Mocha.Context, ...args: [(number | string)?]) {
    const [ms] = args;
    if (typeof ms === 'number' && ms > 0) return setTimeoutOf.call(this, scaledMs(ms));
    return setTimeoutOf.apply(this, args);
  };
}
