import pg from 'pg';

/** What the guard of a child process prints before it exits 70 (pg-overlap-guard.mjs). */
export const PG_OVERLAP_MARKER = 'license-server test guard: overlapping pg statements';

const OVERLAP = /already executing a query/;

/**
 * Makes a statement sent to a pg connection that is still running another a test failure,
 * in this process and in every Node process the tests start (issue 35, item 11). pg only
 * warns, once per process, and pg 9 will throw instead.
 *
 * - Children: NODE_OPTIONS preloads pg-overlap-guard.mjs, which ends the process on the warning.
 * - This process runs every test file, so a warning once per process would catch only the
 *   first overlap of the whole run: every call to Client#query is checked as pg checks it
 *   (a statement already waiting in the connection's queue), and the warning is watched as
 *   well, in case pg's own check moves. Either throws outside the statement's promise, where
 *   no caller's catch can swallow it: mocha fails the test that was running.
 */
export function failOnPgOverlap(): void {
  const guard = new URL('./pg-overlap-guard.mjs', import.meta.url).href;
  const options = process.env.NODE_OPTIONS ?? '';
  if (!options.includes(guard)) process.env.NODE_OPTIONS = `${options} --import=${guard}`.trim();

  const fail = (where: string) => {
    const error = new Error(`${PG_OVERLAP_MARKER}: a statement was sent to a pg connection that is still running another (pg 9 throws here)\n${where}`);
    process.nextTick(() => {
      throw error;
    });
  };
  process.on('warning', (warning) => {
    if (warning.name === 'DeprecationWarning' && OVERLAP.test(warning.message)) fail(warning.stack ?? warning.message);
  });
  const prototype = pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown; _queryQueue?: unknown[]; pipeline?: boolean };
  const query = prototype.query;
  prototype.query = function (this: typeof prototype, ...args: unknown[]) {
    if ((this._queryQueue?.length ?? 0) > 0 && !this.pipeline) fail(new Error('sent from').stack ?? '');
    return query.apply(this, args);
  };
}
