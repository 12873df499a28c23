import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { collectAttributes, deriveHardwareIdV1, systemSources, type HardwareSources } from '../../src/client/hardware-id.js';

function sources(overrides: Partial<HardwareSources> = {}): HardwareSources {
  const files: Record<string, string> = {
    '/etc/machine-id': '4f1c9e2a8b7d4c3e9f0a1b2c3d4e5f60',
    '/sys/block/sda/device/serial': 'WD-WCC4N1234567',
    '/sys/block/loop0/device/serial': 'ignored',
  };
  return {
    readFile: (file) => files[file],
    listDir: (dir) => (dir === '/sys/block' ? ['sda', 'loop0'] : []),
    cpuModel: () => 'Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz',
    interfaces: () => [
      { name: 'lo', mac: '00:00:00:00:00:00', internal: true },
      { name: 'eth0', mac: '3C:7C:3F:1A:2B:3C', internal: false },
      { name: 'docker0', mac: '02:42:ac:11:00:02', internal: false },
      { name: 'wlan0', mac: '5a:11:22:33:44:55', internal: false },
      { name: 'veth12ab', mac: '7e:00:00:00:00:01', internal: false },
    ],
    hostname: () => 'build-host',
    platform: () => 'linux',
    ...overrides,
  };
}

describe('hardware ID', () => {
  it('uses the machine id, CPU model, physical MAC addresses and disk serials, skipping virtual ones', () => {
    assert.deepEqual(collectAttributes(sources()), [
      'cpu=Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz',
      'disk=WD-WCC4N1234567',
      'mac=3c:7c:3f:1a:2b:3c',
      'machine-id=4f1c9e2a8b7d4c3e9f0a1b2c3d4e5f60',
    ]);
  });

  it('is a hash: stable for the same machine, different for another, never the raw values', () => {
    const id = deriveHardwareIdV1(sources());
    assert.match(id, /^hw1-[0-9a-f]{40}$/);
    assert.equal(deriveHardwareIdV1(sources()), id);
    assert.notEqual(deriveHardwareIdV1(sources({ cpuModel: () => 'AMD EPYC 7763' })), id);
    for (const raw of ['4f1c9e2a', 'WD-WCC4N', '3c:7c:3f']) assert.ok(!id.includes(raw));
  });

  it('does not change when a container or VPN interface comes and goes', () => {
    const base = sources();
    const withVpn = sources({ interfaces: () => [...base.interfaces(), { name: 'tun0', mac: '00:ff:11:22:33:44', internal: false }] });
    assert.equal(deriveHardwareIdV1(withVpn), deriveHardwareIdV1(base));
  });

  it('changes when a physical interface stops being listed (down, no link, no address), as docs/client.md says', () => {
    const base = sources();
    const withoutEth0 = sources({ interfaces: () => base.interfaces().filter(({ name }) => name !== 'eth0') });
    assert.notEqual(deriveHardwareIdV1(withoutEth0), deriveHardwareIdV1(base));
    assert.ok(!collectAttributes(withoutEth0).some((line) => line.startsWith('mac=')));
    // What the system source lists is what os.networkInterfaces() lists, and nothing else.
    const listed = [...new Set(systemSources.interfaces().map(({ name }) => name))].sort();
    assert.deepEqual(listed, Object.keys(networkInterfaces()).sort());
    const doc = readFileSync(new URL('../../docs/client.md', import.meta.url), 'utf8').replace(/\s+/g, ' ');
    assert.ok(doc.includes("each network interface that Node's `os.networkInterfaces()` lists at that moment"));
    assert.ok(doc.includes('is not listed, so its MAC address drops out and the ID changes'));
  });

  it('falls back to the host name when nothing stable can be read', () => {
    const bare = sources({ readFile: () => undefined, listDir: () => [], cpuModel: () => undefined, interfaces: () => [] });
    assert.deepEqual(collectAttributes(bare), ['host=linux/build-host']);
  });

  it('is the same on this machine across calls', () => {
    assert.equal(deriveHardwareIdV1(), deriveHardwareIdV1());
  });
});
