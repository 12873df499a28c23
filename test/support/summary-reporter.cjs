'use strict';
// The spec reporter, plus mocha's own counts as one plain last line and a JSON file, so
// that CI reports what mocha ran rather than what a log happened to contain. The JSON also
// holds the ten slowest test files: CI's time budget (under 30 minutes) is spent by file.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
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
      const { passes = 0, failures = 0, pending = 0 } = this.stats;
      const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, ms]) => ({ file, seconds: Math.round(ms / 100) / 10 }));
      const file = process.env.MOCHA_SUMMARY_FILE || path.resolve('test-results.json');
      const files = Object.fromEntries([...byFile].sort((a, b) => b[1] - a[1]).map(([name, ms]) => [name, Math.round(ms / 100) / 10]));
      fs.writeFileSync(file, JSON.stringify({ passed: passes, failed: failures, skipped: pending, slowest_files: slowest, files_seconds: files }) + '\n');
      process.stdout.write(`\nslowest files: ${slowest.map(({ file, seconds }) => `${file} ${seconds} s`).join(', ')}\n`);
      process.stdout.write(`\n${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
