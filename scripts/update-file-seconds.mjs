#!/usr/bin/env node
// Writes test/file-seconds.json, the CPU seconds each test file took (mocha's and the
// processes it reaped; the wall seconds where a run did not measure CPU), from the results
// of a CI run's shards of the whole suite (.ci/.results/*-all-*.json, written by the summary
// reporter): `node scripts/update-file-seconds.mjs [.ci/.results]`. scripts/test.mjs balances
// LICENSE_TEST_SHARD by it, so that each shard spends about a third of the CPU budget that
// .ci/run gives the shards together; refresh it when files are added or grow.
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2] ?? fileURLToPath(new URL('../.ci/.results', import.meta.url));
const seconds = {};
for (const name of readdirSync(dir).filter((file) => /-all-\d+-of-\d+\.json$/.test(file))) {
  const run = JSON.parse(readFileSync(path.join(dir, name), 'utf8'));
  Object.assign(seconds, run.files_process_cpu_seconds ?? run.files_seconds ?? {});
}
if (Object.keys(seconds).length === 0) throw new Error(`no shard of the whole suite in ${dir}`);
const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => (a < b ? -1 : 1)));
writeFileSync(new URL('../test/file-seconds.json', import.meta.url), `${JSON.stringify(sorted, null, 1)}\n`);
console.log(`test/file-seconds.json: ${Object.keys(sorted).length} files, ${Math.round(Object.values(sorted).reduce((a, b) => a + b, 0))} s in all`);
