import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runCli } from '../support/cli.js';

/**
 * Usage errors keep their detail (which argument or flag, and why) and read like every other
 * error: `Error: ... (CODE)`, then `Try: ...`, exit 2; with --json the error document alone.
 */
describe('usage errors on the command line', () => {
  let cwd: string;
  before(() => (cwd = mkdtempSync(path.join(tmpdir(), 'license-usage-'))));
  after(() => {
    assert.deepEqual(readdirSync(cwd), [], 'a usage error creates nothing');
    rmSync(cwd, { recursive: true, force: true });
  });

  const cases: Array<{ argv: string[]; code: string; message: string; hint: string }> = [
    {
      argv: ['backup', 'validate'],
      code: 'USAGE',
      message: 'Missing 1 required arg: backup (Backup id, or the path of a backup file.)',
      hint: 'See `license-server backup validate --help` for its arguments and flags.',
    },
    {
      argv: ['license', 'checkout', 'X'],
      code: 'USAGE',
      message: 'Missing required flag ttl-days',
      hint: 'See `license-server license checkout --help` for its arguments and flags.',
    },
    {
      argv: ['license', 'verify', 'x.lic', '--skip-hardware-check', '--hardware-id', 'm1'],
      code: 'USAGE',
      message: '--hardware-id=m1 cannot also be provided when using --skip-hardware-check',
      hint: 'See `license-server license verify --help` for its arguments and flags.',
    },
    {
      argv: ['license', 'list', '--limit', 'many'],
      code: 'USAGE',
      message: 'Parsing --limit: Expected an integer but received: many',
      hint: 'See `license-server license list --help` for its arguments and flags.',
    },
    {
      argv: ['customer', 'list', '--bogus'],
      code: 'USAGE',
      message: 'Nonexistent flag: --bogus',
      hint: 'See `license-server customer list --help` for its arguments and flags.',
    },
    {
      argv: ['nosuch'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "nosuch"',
      hint: 'See `license-server --help` for the commands.',
    },
    {
      argv: ['license', 'nosuch'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "license nosuch"',
      hint: 'The license commands are activate, checkout, create, deactivate, import, inspect, list, renew, show, update, usage, verify; see `license-server license --help`.',
    },
    // Typos get oclif's not-found suggestion (its nearest command by edit distance), in the
    // message so that --json carries it too; far-off words get none.
    {
      argv: ['licence', 'list'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "licence list"; did you mean "license list"?',
      hint: 'See `license-server --help` for the commands.',
    },
    {
      argv: ['lisence', 'show', 'ABCD'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "lisence show ABCD"; did you mean "license show"?',
      hint: 'See `license-server --help` for the commands.',
    },
    {
      argv: ['license', 'lst'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "license lst"; did you mean "license list"?',
      hint: 'The license commands are activate, checkout, create, deactivate, import, inspect, list, renew, show, update, usage, verify; see `license-server license --help`.',
    },
    {
      argv: ['licence'],
      code: 'COMMAND_NOT_FOUND',
      message: 'unknown command "licence"; did you mean "license"?',
      hint: 'See `license-server --help` for the commands.',
    },
    {
      argv: ['backup', 'list', '--limt', '2'],
      code: 'USAGE',
      message: 'Nonexistent flag: --limt; did you mean --limit?',
      hint: 'See `license-server backup list --help` for its arguments and flags.',
    },
  ];

  for (const { argv, code, message, hint } of cases) {
    it(`names what is wrong: ${argv.join(' ')}`, async () => {
      const result = await runCli(argv, { cwd });
      assert.equal(result.code, 2, result.stderr);
      assert.equal(result.stdout, '');
      assert.equal(result.stderr, `Error: ${message} (${code})\nTry: ${hint}\n`);

      const json = await runCli([...argv, '--json'], { cwd });
      assert.equal(json.code, 2, json.stderr);
      assert.equal(json.stderr, '');
      assert.deepEqual(json.json(), { error: { code, message } });
    });
  }
});
