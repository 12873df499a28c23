#!/usr/bin/env node
// This checkout against another commit (the previous release), in one run on one machine:
//
//   npm run build && node bench/compare.mjs --against <commit> [--runs 15] [--rounds 3]
//     [--seconds 5] [--connections 50] [--only startup|http]
//
// The other commit is checked out into a temporary git worktree that borrows this
// checkout's node_modules (so it must not need a dependency this one lacks) and built there.
// - startup: `license list` (SQLite, 50 licenses, each build on its own data directory) as
//   fresh processes, interleaved round by round with a bare oclif CLI that prints one line
//   (bench/lib/hello-cli) so that machine noise hits all three alike; medians compared.
//   Goal from issue 35: at most 1.15x the bare CLI.
// - http: both builds' `serve` (SQLite) and the bare node:http baseline run side by side;
//   each round loads checkouts, then validations, on one build and then the other (the order
//   alternates), and the baseline once. Rates are medians over the rounds; "x bare" is each
//   round's rate over that round's baseline.
// A ratio of this checkout to the other below 1 is a regression to explain.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BARE_REQUEST, BASELINE_SOURCE, adminToken, load, prepareLicense, startProcess } from './lib/daemon.mjs';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const against = arg('against', undefined);
if (!against) {
  console.error('usage: node bench/compare.mjs --against <commit> [--runs 15] [--rounds 3] [--seconds 5] [--connections 50] [--only startup|http]');
  process.exit(2);
}
const runs = Number(arg('runs', 15));
const rounds = Number(arg('rounds', 3));
const seconds = Number(arg('seconds', 5));
const connections = Number(arg('connections', 50));
const only = arg('only', undefined);

const root = fileURLToPath(new URL('..', import.meta.url));
const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim();
const otherSha = git('rev-parse', '--short', `${against}^{commit}`);
const thisName = `this (${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--untracked-files=no') ? '+changes' : ''})`;
const scratch = mkdtempSync(path.join(tmpdir(), 'license-bench-compare-'));
const otherRoot = path.join(scratch, 'other');
const children = [];

const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

function cleanEnv(dataDir) {
  const env = { ...process.env, LICENSE_DATA_DIR: dataDir };
  for (const name of Object.keys(env)) if (name.startsWith('LICENSE_') && name !== 'LICENSE_DATA_DIR') delete env[name];
  return env;
}

function timed(args, env) {
  const started = process.hrtime.bigint();
  const result = spawnSync(process.execPath, args, { env, cwd: scratch, encoding: 'utf8' });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  if (result.status !== 0) throw new Error(`${args.join(' ')} failed (${result.status}): ${result.stderr}`);
  return { ms, stdout: result.stdout };
}

async function compareStartup(builds) {
  const hello = { name: 'bare oclif CLI: hello', args: [fileURLToPath(new URL('lib/hello-cli/bin/run.js', import.meta.url)), 'hello'], env: cleanEnv(path.join(scratch, 'unused')) };
  const cases = [hello];
  for (const build of builds) {
    const cli = path.join(build.root, 'bin/run.js');
    const env = cleanEnv(path.join(scratch, `data-${build.key}`));
    timed([cli, 'init'], env);
    const customer = JSON.parse(timed([cli, 'customer', 'create', '--name', 'Bench', '--json'], env).stdout).id;
    timed([cli, 'entitlement', 'create', '--code', 'seats', '--name', 'Seats'], env);
    for (let i = 0; i < 50; i += 1) {
      timed([cli, 'license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--entitlement', 'seats:5'], env);
    }
    cases.push({ name: `${build.name}: license list`, args: [cli, 'license', 'list'], env, build });
  }
  const samples = new Map(cases.map((c) => [c, []]));
  for (const c of cases) timed(c.args, c.env); // the file cache and V8's compile cache
  for (let round = 0; round < runs; round += 1) {
    const order = round % 2 ? [...cases].reverse() : cases;
    for (const c of order) samples.get(c).push(timed(c.args, c.env).ms);
  }
  const helloMs = median(samples.get(hello));
  console.log(`\nstart-up: ${runs} runs each, interleaved, node ${process.version}`);
  for (const c of cases) {
    const ms = median(samples.get(c));
    const goal = c.build ? `  (goal <= 1.15x: ${ms / helloMs <= 1.15 ? 'met' : 'MISSED'})` : '';
    console.log(`  ${c.name.padEnd(44)} ${ms.toFixed(1).padStart(7)} ms  ${(ms / helloMs).toFixed(2)}x bare${goal}`);
  }
  const [mine, theirs] = cases.slice(1).map((c) => median(samples.get(c)));
  console.log(`  license list, this / ${otherSha}: ${(mine / theirs).toFixed(2)}x the time`);
}

async function compareHttp(builds) {
  const start = (args, env) => startProcess(args, { cwd: scratch, env, children });
  const bare = await start(['-e', BASELINE_SOURCE]);
  const opts = { seconds, connections };
  for (const build of builds) {
    const serve = await start([path.join(build.root, 'bin/run.js'), 'serve', '--port', '0'], {
      ...cleanEnv(path.join(scratch, `serve-${build.key}`)),
      LICENSE_CLIENT_RATE_LIMIT: '0',
    });
    build.url = serve.url;
    build.requests = await prepareLicense(serve.url, adminToken(serve.out));
    build.rates = { checkout: [], validate: [] };
    build.ratios = { checkout: [], validate: [] };
    build.failures = 0;
    await load(serve.url, build.requests.checkout, { seconds: 2, connections });
    await load(serve.url, build.requests.validate, { seconds: 2, connections });
  }
  await load(bare.url, BARE_REQUEST, { seconds: 2, connections });
  const bareRates = [];
  for (let round = 0; round < rounds; round += 1) {
    const bareRate = (await load(bare.url, BARE_REQUEST, opts)).rate;
    bareRates.push(bareRate);
    for (const build of round % 2 ? [...builds].reverse() : builds) {
      for (const route of ['checkout', 'validate']) {
        const result = await load(build.url, build.requests[route], opts);
        build.failures += result.non2xx + result.errors;
        build.rates[route].push(result.rate);
        build.ratios[route].push(result.rate / bareRate);
      }
    }
  }
  console.log(`\nHTTP (SQLite, no machine limit): ${rounds} rounds of ${seconds} s per route, ${connections} connections, autocannon in this process, node ${process.version}`);
  console.log(`  ${'bare node:http + Ed25519 sign'.padEnd(44)} ${median(bareRates).toFixed(0).padStart(6)}/s`);
  for (const route of ['checkout', 'validate']) {
    for (const build of builds) {
      const rates = build.rates[route].map((r) => r.toFixed(0)).join(', ');
      console.log(`  ${`${build.name}: ${route}`.padEnd(44)} ${median(build.rates[route]).toFixed(0).padStart(6)}/s  ${median(build.ratios[route]).toFixed(2)}x bare  (rounds: ${rates})`);
    }
    const perRound = builds[0].rates[route].map((rate, i) => rate / builds[1].rates[route][i]);
    console.log(`  ${route}, this / ${otherSha}: ${median(perRound).toFixed(2)}x the rate (per round: ${perRound.map((r) => r.toFixed(2)).join(', ')})`);
  }
  for (const build of builds) if (build.failures) console.log(`  ${build.name}: ${build.failures} non-2xx answers or errors`);
}

try {
  git('worktree', 'add', '--detach', otherRoot, otherSha);
  symlinkSync(path.join(root, 'node_modules'), path.join(otherRoot, 'node_modules'));
  execFileSync(process.execPath, ['scripts/build.mjs'], { cwd: otherRoot, stdio: ['ignore', 'ignore', 'inherit'] });
  const builds = [
    { key: 'this', name: thisName, root },
    { key: 'other', name: otherSha, root: otherRoot },
  ];
  if (only !== 'http') await compareStartup(builds);
  if (only !== 'startup') await compareHttp(builds);
} finally {
  for (const child of children) child.kill('SIGTERM');
  await new Promise((resolve) => setTimeout(resolve, 500));
  try {
    git('worktree', 'remove', '--force', otherRoot);
  } catch {
    // Removed below with the rest of the scratch directory; `git worktree prune` forgets it.
  }
  rmSync(scratch, { recursive: true, force: true });
}
