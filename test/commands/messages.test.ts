import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';

/**
 * Messages a new operator met that said something untrue or unhelpful (issue 23): each row
 * is one, with the whole error line and the Try: line it must print now.
 */
describe('error messages and hints that say what is true', () => {
  let work: string;
  let env: Record<string, string>;
  const cli = (args: readonly string[], extra: Record<string, string> = {}) => runCli(args, { cwd: work, env: { ...env, ...extra } });
  const missing = '0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b';
  const store = { licenseId: '', keyId: '', plainBackup: '' };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-messages-'));
    env = { LICENSE_DATA_DIR: path.join(work, 'data') };
    ok(await cli(['init']));
    const customer = ok(await cli(['customer', 'create', '--name', 'Initech'])).stdout.trim();
    store.licenseId = ok(await cli(['license', 'create', '--customer', customer, '--type', 'time_based', '--valid-until', '2099-12-31', '--max-machines', '1', '--json'])).json().id;
    ok(await cli(['license', 'checkout', store.licenseId, '--ttl-days', '1', '--hardware-id', 'FIRST', '--out', path.join(work, 'first.lic')]));
    ok(await cli(['token', 'create', '--name', 'ops', '--json']));
    ok(await cli(['token', 'revoke', 'ops']));
    store.keyId = ok(await cli(['signing-key', 'list', '--json'])).json()[0].key_id;
    writeFileSync(path.join(work, 'short-passphrase'), 'too short\n');
    store.plainBackup = path.join(work, 'data', 'backups', ok(await cli(['backup', 'create', '--json'], { LICENSE_BACKUP_ENCRYPTION_KEY: '' })).json().file);
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  const cases: Array<{ title: string; argv: () => string[]; env?: Record<string, string>; error: string | RegExp | (() => string); hint: string | (() => string) }> = [
    {
      title: 'a UUID that names nothing is shown: it is an id, not a key or token (machine show)',
      argv: () => ['machine', 'show', missing],
      error: `no machine has the id "${missing}" (MACHINE_NOT_FOUND)`,
      hint: 'List machines with `license-server machine list --license ID`.',
    },
    {
      title: 'a UUID that names nothing is shown (token revoke)',
      argv: () => ['token', 'revoke', missing],
      error: `no live token has the id or name "${missing}" (TOKEN_NOT_FOUND)`,
      hint: 'List tokens with `license-server token list`.',
    },
    {
      title: 'a license reference that is neither id nor key is shown, instead of "got that reference"',
      argv: () => ['license', 'show', 'nonsense'],
      error: 'expected a license id (UUID) or a license key, got "nonsense" (INVALID_ID)',
      hint: 'Name a license by its id, a UUID such as 0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b, or by its key, seven groups of four characters such as 7KQ2-M9XD-1RTV-...',
    },
    {
      title: 'a mistyped license key shows no more than a key prefix of it',
      argv: () => ['license', 'show', '7KQ2-M9XD-1RTV-A279-13YD-Q43M-BX'],
      error: 'expected a license id (UUID) or a license key, got "7KQ2-M9X" and 24 more characters (INVALID_ID)',
      hint: 'Name a license by its id, a UUID such as 0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b, or by its key, seven groups of four characters such as 7KQ2-M9XD-1RTV-...',
    },
    {
      title: 'a limit of one machine is not "all 1 machine ... are in use"',
      argv: () => ['license', 'checkout', store.licenseId, '--ttl-days', '1', '--hardware-id', 'SECOND', '--out', path.join(work, 'second.lic')],
      error: () => `this license allows 1 machine at a time, and another machine holds its seat (license ${store.licenseId}) (MACHINE_LIMIT_EXCEEDED)`,
      hint: 'Every seat of the license is taken: `license-server machine list --license ID --holding-seat` shows by what. Free one with `machine deactivate ID`, or with `machine release ID --lost-file` when an offline file was lost; or raise --max-machines.',
    },
    {
      title: 'the name of a revoked token is not offered back by "revoke the old token first"',
      argv: () => ['token', 'create', '--name', 'ops'],
      error: 'a token named "ops" exists or existed; names are never reused (TOKEN_NAME_EXISTS)',
      hint: 'Pick another name; `license-server token list --all` shows the names taken, revoked tokens\' included.',
    },
    {
      title: 'a passphrase file with a short passphrase is not told to pass --passphrase-file',
      argv: () => ['signing-key', 'export', store.keyId, '--out', path.join(work, 'escrow.p8'), '--passphrase-file', path.join(work, 'short-passphrase')],
      error: 'the passphrase has fewer than 12 characters (PASSPHRASE_REQUIRED)',
      hint: () => `Write a passphrase of at least 12 characters on the first line of ${path.join(work, 'short-passphrase')}.`,
    },
    {
      title: 'an unencrypted backup given to backup decrypt is a plain .tar.gz, not "not a license-server backup"',
      argv: () => ['backup', 'decrypt', store.plainBackup, '--out', path.join(work, 'plain.tar.gz')],
      error: /^.+\.backup\.tar\.gz is not encrypted: it is a plain \.tar\.gz backup already \(INVALID_INPUT\)$/,
      hint: 'Open it with tar -xzf; only an encrypted backup (.enc) needs `backup decrypt`.',
    },
    {
      title: 'the same without a backup key: no "set backup.encryption_key" for a file that needs none',
      argv: () => ['backup', 'decrypt', store.plainBackup, '--out', path.join(work, 'plain.tar.gz')],
      env: { LICENSE_BACKUP_ENCRYPTION_KEY: '' },
      error: /^.+\.backup\.tar\.gz is not encrypted: it is a plain \.tar\.gz backup already \(INVALID_INPUT\)$/,
      hint: 'Open it with tar -xzf; only an encrypted backup (.enc) needs `backup decrypt`.',
    },
  ];

  for (const { title, argv, env: extra, error, hint } of cases) {
    it(title, async () => {
      const before = readdirSync(work).sort();
      const result = await cli(argv(), { LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32), ...extra });
      assert.notEqual(result.code, 0, result.stdout);
      const [errorLine, tryLine, ...rest] = result.stderr.split('\n');
      if (error instanceof RegExp) assert.match(errorLine!.replace(/^Error: /, ''), error);
      else assert.equal(errorLine, `Error: ${typeof error === 'function' ? error() : error}`);
      assert.equal(tryLine, `Try: ${typeof hint === 'function' ? hint() : hint}`);
      assert.deepEqual(rest, ['']);
      assert.deepEqual(readdirSync(work).sort(), before, 'and writes nothing');
    });
  }
});
