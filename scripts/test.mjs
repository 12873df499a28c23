#!/usr/bin/env node
// `npm test`: mocha over every test file, or over a part of them chosen by the environment,
// with any further arguments passed on to mocha (`npm test -- --grep seats`).
//
//   LICENSE_TEST_SHARD=K/N   the K-th of N shards of the whole suite, balanced by the CPU
//                            seconds each file took in a recent CI run (test/file-seconds.json),
//                            so that N shards run side by side spend alike and finish together.
//                            A file missing from the table counts as the median.
//   LICENSE_TEST_SET=node-line  only the files that test what changes from one Node line to the
//                            next (see NODE_LINE below): .ci/run runs them on the Node lines
//                            besides the one that runs everything.
//
// Shards and sets are for CI; without them every file runs, as the README's `npm test` says.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));

/**
 * What differs between Node lines, and the tests that exercise it:
 * - the native SQLite driver (better-sqlite3 12 built here on Node 20, 13's Node-API binaries
 *   on 22 and 24) and the pg driver: test/lib/storage, and the rest of test/lib, which runs the
 *   core in-process (crypto, formats, the archive's streams, notifications), but for the tests
 *   of what the databases, the file system and the peers do (query plans, damaged archives,
 *   dumps, schedules and retention over time, the off-site targets against sshd and S3);
 * - node:crypto, fetch and the timers the client package leans on: test/client (but for the
 *   hardware IDs read in network namespaces, which the kernel decides; test/clients drives the
 *   Go client and the Python readers);
 * - the CLI's start under oclif, its output and exit codes: test/cli, test/scripts, and the
 *   command tests of --version, exit status and usage errors;
 * - node:http's parser, timeouts and TLS in the daemon: the HTTP tests named below.
 * The query plans, filters, bulk jobs and imports of the console (issue 36) test what the
 * engines do with SQL, as storage/list-plans does: one line runs them.
 * The rest (the commands end to end, SIGKILL loops, cross-engine restores, fault injection
 * against PostgreSQL and the peers, the admin page in Chromium) tests what SQLite, PostgreSQL,
 * the file system and the peers do, which is the same on every Node line; it runs on one.
 * On 2026-11-29 this set took 5-7 minutes beside the whole suite; the whole set of files
 * under test/lib, test/client and test/commands named earlier took 20.
 */
const NODE_LINE = [
  /^test\/lib\/(?!backup\/(targets\/|damage|postgres-dump|scheduler|retention|copy-out|docs)|notifications\/license-clock|storage\/list-plans|search-plans|bulk\/|licensing\/license-filters|import\/)/,
  /^test\/client\/(?!hardware-id-netns\.test\.ts$)/,
  /^test\/cli\//,
  /^test\/scripts\//,
  /^test\/commands\/(version|exit-status|usage-errors)\.test\.ts$/,
  /^test\/http\/(api|daemon|hostile-input|json-in-slices|pipelining|request-id|connection-limits)\.test\.ts$/,
];

function testFiles(dir = 'test') {
  const files = [];
  for (const entry of readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const name = `${dir}/${entry.name}`;
    if (entry.isDirectory()) files.push(...testFiles(name));
    else if (entry.name.endsWith('.test.ts')) files.push(name);
  }
  return files.sort();
}

/** The files of shard `index` (0-based) of `count`: longest first, each to the lightest shard. */
export function shardOf(files, index, count, seconds) {
  const known = files.map((file) => seconds[file]).filter((value) => typeof value === 'number').sort((a, b) => a - b);
  const median = known.length > 0 ? known[Math.floor(known.length / 2)] : 1;
  const cost = (file) => seconds[file] ?? median;
  const shards = Array.from({ length: count }, () => ({ total: 0, files: [] }));
  for (const file of [...files].sort((a, b) => cost(b) - cost(a) || (a < b ? -1 : 1))) {
    const lightest = shards.reduce((best, shard) => (shard.total < best.total ? shard : best));
    lightest.total += cost(file);
    lightest.files.push(file);
  }
  return shards[index].files.sort();
}

export function selected() {
  let files = testFiles();
  const set = process.env.LICENSE_TEST_SET;
  if (set === 'node-line') files = files.filter((file) => NODE_LINE.some((pattern) => pattern.test(file)));
  else if (set) throw new Error(`LICENSE_TEST_SET=${set}: the only set is node-line`);
  const shard = process.env.LICENSE_TEST_SHARD;
  if (shard) {
    const match = /^(\d+)\/(\d+)$/.exec(shard);
    const [index, count] = match ? [Number(match[1]), Number(match[2])] : [0, 0];
    if (!match || index < 1 || index > count) throw new Error(`LICENSE_TEST_SHARD=${shard}: write K/N with 1 <= K <= N`);
    const seconds = JSON.parse(readFileSync(path.join(root, 'test', 'file-seconds.json'), 'utf8'));
    files = shardOf(files, index - 1, count, seconds);
  }
  return files;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  let files;
  try {
    files = selected();
  } catch (error) {
    console.error(`npm test: ${error.message}`);
    process.exit(2);
  }
  const mocha = path.join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
  const child = spawn(process.execPath, [mocha, ...files, ...process.argv.slice(2)], { cwd: root, stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 128 + 15 : 1)));
}
