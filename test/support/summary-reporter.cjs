'use strict';
// The spec reporter, plus mocha's own counts as one plain last line and a JSON file, so
// that CI reports what mocha ran rather than what a log happened to contain. The JSON also
// holds the seconds of every test file: CI's time budget (20 minutes) is spent by file.
// MOCHA_TIME_BUDGET_SECONDS, when set, is the run's budget: a run that takes longer fails
// (one failure more, named in the last lines), so that a suite grown past what CI can afford
// is found when it grows, not when CI's hard limit kills the run.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const startedAt = performance.now();
    const budget = Number(process.env.MOCHA_TIME_BUDGET_SECONDS || 0);
    // Wall time from a file's first suite starting to its last ending, summed over its suites.
    const byFile = new Map();
    const started = new Map();
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && suite.parent && suite.parent.root) started.set(suite, performance.now());
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const at = started.get(suite);
      if (at === undefined) return;
      started.delete(suite);
      const file = path.relative(process.cwd(), suite.file);
      byFile.set(file, (byFile.get(file) ?? 0) + (performance.now() - at));
    });
    runner.once(EVENT_RUN_END, () => {
      const elapsed = Math.round((performance.now() - startedAt) / 1000);
      const overBudget = budget > 0 && elapsed > budget;
      // Counted where mocha counts its failures, so that the exit status says it too.
      if (overBudget) runner.failures += 1;
      const { passes = 0, pending = 0 } = this.stats;
      const failures = (this.stats.failures ?? 0) + (overBudget ? 1 : 0);
      const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, ms]) => ({ file, seconds: Math.round(ms / 100) / 10 }));
      const file = process.env.MOCHA_SUMMARY_FILE || path.resolve('test-results.json');
      const files = Object.fromEntries([...byFile].sort((a, b) => b[1] - a[1]).map(([name, ms]) => [name, Math.round(ms / 100) / 10]));
      fs.writeFileSync(file, JSON.stringify({ passed: passes, failed: failures, skipped: pending, seconds: elapsed, budget_seconds: budget || null, slowest_files: slowest, files_seconds: files }) + '\n');
      process.stdout.write(`\nslowest files: ${slowest.map(({ file, seconds }) => `${file} ${seconds} s`).join(', ')}\n`);
      if (overBudget) process.stdout.write(`\nthe run took ${elapsed} s, over its budget of ${budget} s (MOCHA_TIME_BUDGET_SECONDS): counted as a failure\n`);
      process.stdout.write(`\n${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
