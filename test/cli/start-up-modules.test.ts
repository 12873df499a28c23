import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ok, runCli } from '../support/cli.js';

const TRACE = fileURLToPath(new URL('../support/module-trace.mjs', import.meta.url));

/**
 * A command's start-up is mostly loading modules (bench/compare.mjs measures it against the
 * previous release and a bare oclif CLI). A module that only some requests need, imported
 * from one that every command reads through, costs every command: `license list` paid
 * 1.21x 6583fa4's time for the HPKE and curve code (through the binding names), the
 * notification settings' validation (through raising events) and worker_threads.
 */
describe('license list start-up', () => {
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-start-up-'));
    env = { LICENSE_DATA_DIR: path.join(dir, 'data') };
    ok(await runCli(['init'], { env }));
    const customer = ok(await runCli(['customer', 'create', '--name', 'Start-up', '--json'], { env })).json<{ id: string }>().id;
    ok(await runCli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--binding', 'machine-key'], { env }));
  });

  after(() => rmSync(dir, { recursive: true, force: true }));

  it('loads no sealing or signing code, no notification settings, no worker threads and no DNS', async () => {
    const listed = async (esm: boolean) => {
      const traceFile = path.join(dir, `modules-${esm}.txt`);
      const result = ok(await runCli(['license', 'list'], { env: { ...env, NODE_OPTIONS: `--import ${TRACE}`, MODULE_TRACE_FILE: traceFile, MODULE_TRACE_ESM: esm ? '1' : '0' } }));
      assert.match(result.stdout, /time_based/);
      return readFileSync(traceFile, 'utf8').split('\n');
    };
    // ES modules in one run; built-ins in another, without the loader hook's thread. A
    // built-in that merely importing node:util loads (Node 22 loads worker_threads then) is
    // not the command's doing.
    const bare = path.join(dir, 'modules-bare.txt');
    execFileSync(process.execPath, ['--import', TRACE, '--input-type=module', '-e', "import 'node:util';"], { env: { ...process.env, MODULE_TRACE_FILE: bare, MODULE_TRACE_ESM: '0' } });
    const bareBuiltins = new Set(readFileSync(bare, 'utf8').split('\n'));
    const loaded = [...(await listed(true)).filter((entry) => !entry.startsWith('node:')), ...(await listed(false)).filter((entry) => !bareBuiltins.has(entry))];
    // The trace saw the command itself, so an empty one cannot pass.
    assert.ok(loaded.some((entry) => entry.endsWith('/dist/commands/license/list.js')), `the trace lists the command's module:\n${loaded.join('\n')}`);
    const needless = loaded.filter((entry) =>
      [/\/node_modules\/@noble\//, /\/dist\/lib\/crypto\/(hpke|x25519-small-order|key-endorsement)\.js$/, /\/dist\/lib\/offline\/machine-key\.js$/, /\/dist\/lib\/notifications\/(settings|address)\.js$/, /^node:(worker_threads|dns)$/].some((pattern) => pattern.test(entry)),
    );
    assert.deepEqual(needless, [], 'license list loaded modules that only other commands need');
  });
});
