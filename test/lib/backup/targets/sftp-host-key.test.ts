import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { keyTypeOf, knownHostKeyTypes, sha256Fingerprint, verifyHostKey } from '../../../../src/lib/backup/targets/sftp-host-key.js';
import { sshdProblem } from '../../../support/sshd.js';

/** The SFTP host key check, against OpenSSH's own ssh-keygen: its fingerprints, and which known_hosts lines it finds for a name (-F). */
describe('the SFTP host key check agrees with ssh-keygen', function () {
  this.timeout(30_000);
  let dir: string;
  const publicKey = (name: string, type: string, bits?: number) => {
    const file = path.join(dir, name);
    execFileSync('ssh-keygen', ['-q', '-t', type, ...(bits ? ['-b', String(bits)] : []), '-N', '', '-f', file], { stdio: 'ignore' });
    const [keyType, base64] = readFileSync(`${file}.pub`, 'utf8').trim().split(' ');
    return { file: `${file}.pub`, keyType: keyType!, base64: base64!, blob: Buffer.from(base64!, 'base64') };
  };

  before(function () {
    if (sshdProblem()?.includes('ssh-keygen')) {
      if (process.env.CI === 'true') throw new Error('ssh-keygen is required under CI=true');
      this.skip();
    }
    dir = mkdtempSync(path.join(tmpdir(), 'license-server-host-key-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('computes the SHA256 fingerprint ssh-keygen -lf prints, for Ed25519, ECDSA and RSA keys', () => {
    for (const [type, bits] of [['ed25519'], ['ecdsa', 384], ['rsa', 2048]] as const) {
      const key = publicKey(`fingerprint-${type}`, type, bits);
      const printed = execFileSync('ssh-keygen', ['-l', '-E', 'sha256', '-f', key.file], { encoding: 'utf8' }).split(' ')[1];
      assert.equal(sha256Fingerprint(key.blob), printed, type);
      assert.equal(keyTypeOf(key.blob), key.keyType);
      assert.deepEqual(verifyHostKey({ fingerprints: [printed!] }, 'h', 22, key.blob), { accepted: true });
      // As people paste it from elsewhere: with base64 padding, or with spaces around.
      assert.deepEqual(verifyHostKey({ fingerprints: [` ${printed}= `] }, 'h', 22, key.blob), { accepted: true });
    }
  });

  it('finds the known_hosts lines ssh-keygen -F finds: patterns, negation, ports, hashed entries, any case', () => {
    const hostFields = ['*.example.com,!bad.example.com', 'host?.lan', '[10.0.0.5]:2222', '10.0.0.5', 'Mixed.Case.ORG', '[db.internal]:2200'];
    const keys = hostFields.map((_, i) => publicKey(`line-${i}`, 'ed25519'));
    const file = path.join(dir, 'known_hosts');
    writeFileSync(file, hostFields.map((hosts, i) => `${hosts} ${keys[i]!.keyType} ${keys[i]!.base64}\n`).join(''));
    // Hash the last line only, as `ssh-keygen -H` would after a first connection with HashKnownHosts.
    const last = path.join(dir, 'last');
    writeFileSync(last, `${hostFields.at(-1)} ${keys.at(-1)!.keyType} ${keys.at(-1)!.base64}\n`);
    execFileSync('ssh-keygen', ['-H', '-f', last], { stdio: 'ignore' });
    const lines = readFileSync(file, 'utf8').split('\n').slice(0, -2);
    lines.push(readFileSync(last, 'utf8').trim());
    writeFileSync(file, `${lines.join('\n')}\n`);
    assert.match(lines.at(-1)!, /^\|1\|/);
    const knownHosts = readFileSync(file, 'utf8');

    const names = ['www.example.com', 'bad.example.com', 'example.com', 'host1.lan', 'host12.lan', '[10.0.0.5]:2222', '10.0.0.5', 'mixed.case.org', '[db.internal]:2200', 'db.internal', '[db.internal]:2201'];
    for (const name of names) {
      const found = spawnSync('ssh-keygen', ['-F', name, '-f', file], { encoding: 'utf8' }).stdout;
      const expected = [...found.matchAll(/found: line (\d+)/g)].map((match) => Number(match[1]) - 1).sort();
      const [, bracketed, port] = /^\[(.+)\]:(\d+)$/.exec(name) ?? [];
      const host = bracketed ?? name;
      const actual = keys.flatMap((key, i) => (verifyHostKey({ knownHosts }, host, Number(port ?? 22), key.blob).accepted ? [i] : []));
      assert.deepEqual(actual, expected, name);
    }
    assert.deepEqual(knownHostKeyTypes(knownHosts, 'db.internal', 2200), ['ssh-ed25519']);
    assert.deepEqual(knownHostKeyTypes(knownHosts, 'nowhere', 22), []);
  });
});
