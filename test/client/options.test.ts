import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import path from 'node:path';
import { defaultCacheDir, keyIdOf, LicenseClientConfigError, type LicenseClientOptions } from '../../src/client/index.js';
import { resolveOptions } from '../../src/client/options.js';
import { publicKeyToPem } from '../../src/lib/crypto/ed25519-pem.js';
import { publicKeyOf } from '../../src/lib/offline/ed25519.js';

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

describe('the client\'s offline.publicKey option', () => {
  const first = publicKeyOf(Buffer.alloc(32, 7));
  const second = publicKeyOf(Buffer.alloc(32, 8));
  const base = { serverAddr: '127.0.0.1:1', licenseKey: 'K', version: '1' };
  const resolve = (offline: LicenseClientOptions['offline']) => resolveOptions({ ...base, offline: { cacheDir: '/tmp/unused', ...offline } });

  it('is parsed once into a key set, in the order given, with each key\'s id', () => {
    const expected = [
      { keyId: keyIdOf(second), publicKey: second },
      { keyId: keyIdOf(first), publicKey: first },
    ];
    assert.deepEqual(resolve({ enabled: true, licenseFile: 'x.lic', publicKey: [publicKeyToPem(second), first] }).offline.publicKey, expected);
    assert.deepEqual(resolve({ enabled: true, licenseFile: 'x.lic', publicKey: `# next\n${publicKeyToPem(second)}# current\n${publicKeyToPem(first)}` }).offline.publicKey, expected);
    assert.deepEqual(resolve({ enabled: true, licenseFile: 'x.lic', publicKey: first }).offline.publicKey, [expected[1]], 'one key is a set of one');
  });

  it('keeps its own copy of raw key bytes', () => {
    const bytes = Uint8Array.from(first);
    const resolved = resolve({ enabled: true, licenseFile: 'x.lic', publicKey: [bytes] });
    bytes.fill(0);
    assert.deepEqual(resolved.offline.publicKey![0]!.publicKey, first);
  });

  it('may be left out, or be an empty list, without offline mode; a bad key is refused all the same', () => {
    assert.equal(resolve({}).offline.publicKey, undefined);
    assert.equal(resolve({ publicKey: [] }).offline.publicKey, undefined);
    assert.throws(() => resolve({ publicKey: 'nope' }), (e: unknown) => e instanceof LicenseClientConfigError && /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them: offline\.publicKey: no PEM "PUBLIC KEY" block$/.test(e.message));
  });

  it('has the messages docs/client.md lists', () => {
    assert.ok(doc.includes('`public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them: <reason>`'));
    const row = doc.split('\n').find((line) => line.startsWith('| `offline.publicKey`'));
    assert.ok(row?.includes('signing-key show --all'), row);
  });
});

describe('the client\'s hardwareId option', () => {
  const base = { serverAddr: '127.0.0.1:1', licenseKey: 'K', version: '1' };
  const messageFor = (hardwareId: unknown): string => {
    try {
      resolveOptions({ ...base, hardwareId } as LicenseClientOptions);
    } catch (error) {
      assert.ok(error instanceof LicenseClientConfigError, String(error));
      return error.message;
    }
    return assert.fail(`${JSON.stringify(hardwareId)} was accepted`);
  };

  it('refuses with the messages docs/client.md lists, one message for an ID that is too long', () => {
    const cases: Array<[unknown, string]> = [
      ['', 'hardwareId must not be empty'],
      ['x'.repeat(257), 'hardwareId must be at most 256 bytes of UTF-8, got 257'],
      ['\u00fc'.repeat(129), 'hardwareId must be at most 256 bytes of UTF-8, got 258'],
      ['u\u0308'.repeat(129), 'hardwareId must be at most 256 bytes of UTF-8, got 258'],
      ['a\nb', 'hardwareId must not contain control characters'],
      ['a\ud800', 'hardwareId must be well-formed Unicode text'],
      [42, 'hardwareId must be a string, got number'],
    ];
    for (const [value, expected] of cases) {
      const message = messageFor(value);
      assert.equal(message, expected);
      const documented = `\`${message.replace(/got \d+$/, 'got N')}\``;
      assert.ok(doc.includes(documented), `docs/client.md lists ${documented}`);
    }
  });

  it('is kept in NFC, as the server keeps it', () => {
    assert.equal(resolveOptions({ ...base, hardwareId: 'HW-u\u0308' }).hardwareId, 'HW-\u00fc');
  });
});
