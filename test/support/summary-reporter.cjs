'use strict';
// The spec reporter, plus mocha's own counts as one plain last line and a JSON file, so
// that CI reports what mocha ran rather than what a log happened to contain.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    runner.once(EVENT_RUN_END, () => {
      const { passes = 0, failures = 0, pending = 0 } = this.stats;
      const file = process.env.MOCHA_SUMMARY_FILE || path.resolve('test-results.json');
      fs.writeFileSync(file, JSON.stringify({ passed: passes, failed: failures, skipped: pending }) + '\n');
      process.stdout.write(`\n${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

module.exports = SummaryReporter;
