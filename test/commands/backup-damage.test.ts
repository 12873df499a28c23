import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli, type CliResult } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

const KEY = 'ef'.repeat(32);

/** The command-line face of test/lib/backup/damage.test.ts: exit 13 and a backup code, never INTERNAL. */
forEachEngine('damaged backups on the command line', (fixture) => {
  let work: string;
  let env: Record<string, string>;
  const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, { env: { ...env, ...extra }, cwd: work });
  const refusedAsDamaged = (result: CliResult, what: string) => {
    assert.equal(result.code, 13, `${what}: exit ${result.code}\n${result.stdout}${result.stderr}`);
    assert.match(result.stderr, /^Error: .*\((BACKUP_CORRUPT|BACKUP_INVALID)\)$/m, what);
  };

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-damage-cli-'));
    const url = await fixture.freshUrl();
    await (await openDatabase(url)).close();
    env = { LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(work, 'backups') };
    ok(await cli(['customer', 'create', '--name', 'Kept']));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  for (const encrypted of [false, true]) {
    it(`refuses a truncated or appended-to ${encrypted ? 'encrypted' : 'unencrypted'} backup in validate and restore with exit 13, changing nothing`, async () => {
      const keyEnv: Record<string, string> = encrypted ? { LICENSE_BACKUP_ENCRYPTION_KEY: KEY } : {};
      const backup = ok(await cli(['backup', 'create', '--json'], keyEnv)).json();
      const bytes = readFileSync(path.join(work, 'backups', backup.file));
      const customers = ok(await cli(['customer', 'list', '--json'])).json();
      const listed = ok(await cli(['backup', 'list', '--json'])).json().length;
      const damaged = path.join(work, `damaged${encrypted ? '.backup.tar.gz.enc' : '.backup.tar.gz'}`);
      const cases: Array<[string, Buffer]> = [
        ['truncated to 10 bytes', bytes.subarray(0, 10)],
        ['truncated to 50 bytes', bytes.subarray(0, 50)],
        ['missing its last byte', bytes.subarray(0, bytes.length - 1)],
        ['with a zero byte appended', Buffer.concat([bytes, Buffer.alloc(1)])],
        ['with 512 zero bytes appended', Buffer.concat([bytes, Buffer.alloc(512)])],
        ['with a gzip member appended', Buffer.concat([bytes, gzipSync(Buffer.alloc(512))])],
      ];
      for (const [what, content] of cases) {
        writeFileSync(damaged, content);
        refusedAsDamaged(await cli(['backup', 'validate', damaged], keyEnv), `validate ${what}`);
        refusedAsDamaged(await cli(['backup', 'restore', damaged, '--yes'], keyEnv), `restore ${what}`);
      }
      // The listed backup itself, appended to in place, is refused by id.
      writeFileSync(path.join(work, 'backups', backup.file), Buffer.concat([bytes, Buffer.alloc(1)]));
      refusedAsDamaged(await cli(['backup', 'validate', backup.backup_id], keyEnv), 'validate by id');
      refusedAsDamaged(await cli(['backup', 'restore', backup.backup_id, '--yes'], keyEnv), 'restore by id');
      writeFileSync(path.join(work, 'backups', backup.file), bytes);
      assert.deepEqual(ok(await cli(['customer', 'list', '--json'])).json(), customers, 'the data is unchanged');
      assert.equal(ok(await cli(['backup', 'list', '--json'])).json().length, listed, 'no pre-restore backup was taken');
    });
  }
});
