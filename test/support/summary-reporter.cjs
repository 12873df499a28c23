'use strict';
// The spec reporter, plus mocha's own counts as one plain last line and a JSON file, so
// that CI reports what mocha ran rather than what a log happened to contain. The JSON also
// holds the seconds of every test file, and on Linux, per file, the CPU seconds of mocha's
// process and of the processes it started and reaped meanwhile (the CLI, daemons, Chromium:
// /proc/self/stat), which runs beside it do not blur, and those of the whole machine
// (/proc/stat, PostgreSQL's work included), which only a run alone on a quiet machine gives.
// MOCHA_CPU_BUDGET_SECONDS, when set, is the run's budget of that process CPU: a run that
// spends more fails (one failure more, named in the last lines with its costliest files), so
// that a suite grown past what CI can afford is found when it grows. It is CPU, not wall
// time: CI's runs share two cores, and the same suite took 1,537 s one day and 2,589 s the
// next as the machine changed; a budget of seconds failed a suite for the machine it ran on.
const fs = require('node:fs');
const path = require('node:path');
const Mocha = require('mocha');

const { EVENT_RUN_END, EVENT_SUITE_BEGIN, EVENT_SUITE_END } = Mocha.Runner.constants;

class SummaryReporter extends Mocha.reporters.Spec {
  constructor(runner, options) {
    super(runner, options);
    const startedAt = performance.now();
    const budget = Number(process.env.MOCHA_CPU_BUDGET_SECONDS || 0);
    const cpuAtStart = processCpuSeconds();
    // Wall time from a file's first suite starting to its last ending, summed over its suites.
    const byFile = new Map();
    const cpuByFile = new Map();
    const ownCpuByFile = new Map();
    const started = new Map();
    runner.on(EVENT_SUITE_BEGIN, (suite) => {
      if (suite.file && suite.parent && suite.parent.root) started.set(suite, { at: performance.now(), cpu: machineCpuSeconds(), own: processCpuSeconds() });
    });
    runner.on(EVENT_SUITE_END, (suite) => {
      const begun = started.get(suite);
      if (begun === undefined) return;
      started.delete(suite);
      const file = path.relative(process.cwd(), suite.file);
      byFile.set(file, (byFile.get(file) ?? 0) + (performance.now() - begun.at));
      const cpu = machineCpuSeconds();
      if (cpu !== undefined && begun.cpu !== undefined) cpuByFile.set(file, (cpuByFile.get(file) ?? 0) + (cpu - begun.cpu));
      const own = processCpuSeconds();
      if (own !== undefined && begun.own !== undefined) ownCpuByFile.set(file, (ownCpuByFile.get(file) ?? 0) + (own - begun.own));
    });
    runner.once(EVENT_RUN_END, () => {
      const elapsed = Math.round((performance.now() - startedAt) / 1000);
      const cpuAtEnd = processCpuSeconds();
      const cpuSeconds = cpuAtStart !== undefined && cpuAtEnd !== undefined ? Math.round(cpuAtEnd - cpuAtStart) : null;
      const overBudget = budget > 0 && cpuSeconds !== null && cpuSeconds > budget;
      // Counted where mocha counts its failures, so that the exit status says it too.
      if (overBudget) runner.failures += 1;
      const { passes = 0, pending = 0 } = this.stats;
      const failures = (this.stats.failures ?? 0) + (overBudget ? 1 : 0);
      const slowest = [...byFile].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([file, ms]) => ({ file, seconds: Math.round(ms / 100) / 10 }));
      const file = process.env.MOCHA_SUMMARY_FILE || path.resolve('test-results.json');
      const rounded = (map) => Object.fromEntries([...map].sort((a, b) => b[1] - a[1]).map(([name, seconds]) => [name, Math.round(seconds * 10) / 10]));
      const files = rounded(new Map([...byFile].map(([name, ms]) => [name, ms / 1000])));
      fs.writeFileSync(
        file,
        JSON.stringify({ passed: passes, failed: failures, skipped: pending, seconds: elapsed, cpu_seconds: cpuSeconds, cpu_budget_seconds: budget || null, slowest_files: slowest, files_seconds: files, files_process_cpu_seconds: rounded(ownCpuByFile), files_machine_cpu_seconds: rounded(cpuByFile) }) + '\n',
      );
      process.stdout.write(`\nslowest files: ${slowest.map(({ file, seconds }) => `${file} ${seconds} s`).join(', ')}\n`);
      const costliest = [...ownCpuByFile].sort((a, b) => b[1] - a[1]).slice(0, 10).map(([name, seconds]) => `${name} ${Math.round(seconds)} s`);
      if (cpuSeconds !== null) process.stdout.write(`\nthe run took ${elapsed} s and ${cpuSeconds} CPU seconds (mocha and the processes it reaped)${budget > 0 ? ` of a budget of ${budget}` : ''}\n`);
      if (overBudget) process.stdout.write(`\nover its CPU budget (MOCHA_CPU_BUDGET_SECONDS): counted as a failure. Costliest files: ${costliest.join(', ')}\n`);
      process.stdout.write(`\n${passes} passed, ${failures} failed, ${pending} skipped\n`);
    });
  }
}

/** Busy CPU seconds of the whole machine since boot (user, nice, system, irq, softirq, steal), or undefined off Linux. */
function machineCpuSeconds() {
  try {
    const [, user, nice, system, , , irq, softirq, steal] = fs.readFileSync('/proc/stat', 'latin1').split('\n', 1)[0].trim().split(/\s+/).map(Number);
    return (user + nice + system + irq + softirq + steal) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}
/** CPU seconds of this process and of its children it has reaped (utime, stime, cutime, cstime), or undefined off Linux. */
function processCpuSeconds() {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'latin1');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ').map(Number);
    return (fields[11] + fields[12] + fields[13] + fields[14]) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}
// USER_HZ, which is 100 on every Linux architecture Node runs on.
const TICKS_PER_SECOND = 100;

module.exports = SummaryReporter;
