import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';

/** The README promises it: list commands print `--limit` rows (default 100), page on with `--cursor`, and take `--offset`. */
describe('list commands and their paging flags', () => {
  it('every list command (and license usage) takes --limit (default 100), --cursor and --offset', () => {
    const manifest = JSON.parse(readFileSync(new URL('../../oclif.manifest.json', import.meta.url), 'utf8'));
    const lists = Object.entries(manifest.commands as Record<string, { flags: Record<string, { default?: unknown }> }>).filter(([id]) => id.endsWith(':list') || id === 'license:usage');
    assert.ok(lists.length >= 9, `${lists.length} list commands`);
    const missing = lists.filter(([, command]) => command.flags.limit?.default !== 100 || !command.flags.offset || !command.flags.cursor).map(([id]) => id);
    assert.deepEqual(missing, []);
  });
});

forEachEngine('paging the lists that had no --limit or --offset', (fixture) => {
  let cwd: string;
  let env: Record<string, string>;
  const cli = (...args: string[]) => runCli(args, { env, cwd });

  before(async function () {
    this.timeout(60_000);
    cwd = mkdtempSync(path.join(tmpdir(), 'license-paging-'));
    env = { LICENSE_DATABASE_URL: await fixture.freshUrl(), LICENSE_BACKUP_PATH: path.join(cwd, 'backups'), LICENSE_BACKUP_ENCRYPTION_KEY: 'ab'.repeat(32) };
    ok(await cli('init'));
    for (const name of ['a', 'b', 'c']) ok(await cli('token', 'create', '--name', name));
    ok(await cli('signing-key', 'rotate'));
    ok(await cli('signing-key', 'rotate'));
    for (let i = 0; i < 3; i += 1) ok(await cli('backup', 'create'));
  });
  after(() => rmSync(cwd, { recursive: true, force: true }));

  for (const list of [['token', 'list'], ['signing-key', 'list'], ['audit', 'list'], ['backup', 'list']]) {
    it(`${list.join(' ')} --limit 1 --offset 1 is the second of the whole list`, async function () {
      this.timeout(30_000);
      const all = ok(await cli(...list, '--json')).json<unknown[]>();
      assert.ok(all.length >= 3, `${all.length} items`);
      assert.deepEqual(ok(await cli(...list, '--limit', '1', '--offset', '1', '--json')).json(), all.slice(1, 2));
      assert.deepEqual(ok(await cli(...list, '--limit', '2', '--json')).json(), all.slice(0, 2));
      const refused = await cli(...list, '--limit', '0', '--json');
      assert.equal(refused.code, 2);
      assert.equal(refused.json().error.code, 'INVALID_INPUT');
    });

    it(`${list.join(' ')} --limit 1 walks the whole list by the --cursor each page prints on standard error`, async function () {
      this.timeout(60_000);
      const all = ok(await cli(...list, '--json')).json<unknown[]>();
      const walked: unknown[] = [];
      for (let cursor: string[] = [], pages = 0; pages <= all.length; pages += 1) {
        const page = ok(await cli(...list, '--limit', '1', ...cursor, '--json'));
        walked.push(...page.json<unknown[]>());
        const next = /^next page: --cursor (\S+)$/m.exec(page.stderr);
        if (!next) break;
        cursor = ['--cursor', next[1]!];
      }
      assert.deepEqual(walked, all);
    });
  }
});
