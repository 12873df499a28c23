'use strict';
// Adds up mocha's own counts (one JSON file per run: a shard, a Node line's set, the alone
// tests; written by the summary reporter) and prints them per run and in total; the total is
// the last line of CI.
const fs = require('node:fs');
const path = require('node:path');

const dir = process.argv[2];
const total = { passed: 0, failed: 0, skipped: 0 };
const files = fs.readdirSync(dir).filter((name) => name.endsWith('.json')).sort();
for (const name of files) {
  const run = JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));
  const cpu = typeof run.cpu_seconds === 'number' ? ` and ${run.cpu_seconds} CPU s${run.cpu_budget_seconds ? ` (budget ${run.cpu_budget_seconds})` : ''}` : '';
  const took = typeof run.seconds === 'number' ? ` in ${run.seconds} s${cpu}` : '';
  console.log(`[ci] ${name.slice(0, -'.json'.length)}: ${run.passed} passed, ${run.failed} failed, ${run.skipped} skipped${took}`);
  for (const key of Object.keys(total)) total[key] += run[key];
}
console.log(`${total.passed} passed, ${total.failed} failed` + (total.skipped ? `, ${total.skipped} skipped` : ''));
process.exitCode = files.length > 0 && total.failed === 0 && total.passed > 0 ? 0 : 1;
