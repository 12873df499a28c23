import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { defaultCacheDir } from '../../src/client/index.js';

const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8');

describe('the client\'s default cache directory', () => {
  const saved = process.env.XDG_CONFIG_HOME;
  afterEach(() => {
    if (saved === undefined) delete process.env.XDG_CONFIG_HOME;
    else process.env.XDG_CONFIG_HOME = saved;
  });

  it('is the directory docs/client.md names on Linux: $XDG_CONFIG_HOME/license-server-client, else ~/.config/license-server-client', function () {
    if (process.platform !== 'linux') this.skip();
    const row = doc.split('\n').find((line) => line.startsWith('| `offline.cacheDir`'));
    assert.ok(row, 'docs/client.md has an offline.cacheDir row');
    assert.ok(row.includes('`$XDG_CONFIG_HOME/license-server-client`'), row);
    assert.ok(row.includes('`~/.config/license-server-client`'), row);
    process.env.XDG_CONFIG_HOME = '/srv/config';
    assert.equal(defaultCacheDir(), '/srv/config/license-server-client');
    delete process.env.XDG_CONFIG_HOME;
    assert.equal(defaultCacheDir(), path.join(homedir(), '.config', 'license-server-client'));
    process.env.XDG_CONFIG_HOME = 'relative/config';
    assert.equal(defaultCacheDir(), path.join(homedir(), '.config', 'license-server-client'), 'a relative XDG_CONFIG_HOME is ignored, as the XDG spec says');
  });
});
