import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import { ok, runCli } from '../support/cli.js';
import { forEachEngine } from '../support/engines.js';
import { eventually } from '../support/fake-clock.js';
import { api, startServe } from '../support/serve.js';

/** config.yaml files with no backup section: settings elsewhere, none at all, a comment alone. */
const SHAPES: Record<string, string> = {
  'issuer only': 'issuer: acme\n',
  empty: '',
  'comment only': '# settings come later\n',
};

forEachEngine('backups with a config file that has no backup section', (fixture) => {
  let work: string;
  let url: string;
  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-config-shapes-'));
    url = await fixture.freshUrl();
    const db = await openDatabase(url);
    await db.close();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  for (const [shape, text] of Object.entries(SHAPES)) {
    it(`creates, validates and restores a backup, keeping the file as it was (${shape})`, async () => {
      const dir = path.join(work, shape.replace(/\W/g, '-'));
      mkdirSync(dir);
      const config = path.join(dir, 'config.yaml');
      writeFileSync(config, text);
      const env = { LICENSE_CONFIG: config, LICENSE_DATABASE_URL: url, LICENSE_BACKUP_PATH: path.join(dir, 'backups') };
      const cli = (args: string[]) => runCli(args, { env, cwd: dir });

      const created = ok(await cli(['backup', 'create', '--json'])).json();
      const inBackup = execFileSync('tar', ['-xzOf', path.join(dir, 'backups', created.file), 'config/config.yaml'], { encoding: 'utf8' });
      assert.equal(inBackup, text, 'the backed-up file is the file');

      assert.equal(ok(await cli(['backup', 'validate', created.backup_id, '--json'])).json().valid, true);

      const restored = ok(await cli(['backup', 'restore', created.backup_id, '--yes', '--json'])).json();
      assert.equal(readFileSync(config, 'utf8'), text, 'the restored file gained and lost nothing');
      assert.equal(readFileSync(restored.replaced_config, 'utf8'), text, 'the replaced file is kept as it was');
    });
  }
});

describe('the backup schedule with a config file that has no backup section', () => {
  for (const [shape, text] of Object.entries(SHAPES)) {
    it(`runs the catch-up backup at start (${shape})`, async () => {
      const work = mkdtempSync(path.join(tmpdir(), 'license-config-shapes-serve-'));
      const config = path.join(work, 'config.yaml');
      writeFileSync(config, text);
      const serve = await startServe({
        LICENSE_CONFIG: config,
        LICENSE_DATABASE_URL: path.join(work, 'data', 'db.sqlite'),
        LICENSE_BACKUP_PATH: path.join(work, 'backups'),
        LICENSE_BACKUP_ENABLED: 'true',
        LICENSE_BACKUP_SCHEDULE: '0 3 * * *',
      });
      try {
        let lastRun: { status: string; error?: string } | null = null;
        await eventually(async () => {
          lastRun = (await api(serve.url, 'GET', '/api/backups', { token: serve.token })).body.scheduler.last_run;
          return lastRun !== null && lastRun.status !== 'running';
        }, 'the catch-up backup has run');
        assert.equal(lastRun!.status, 'succeeded', JSON.stringify(lastRun));
      } finally {
        await serve.stop();
        rmSync(work, { recursive: true, force: true });
      }
    });
  }
});
