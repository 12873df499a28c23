import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { cpus, hostname, networkInterfaces, platform } from 'node:os';
import { deriveHardwareIdV2 } from './hardware-id-v2.js';

/** The derivations a client can use: `hw2` (the default) and the former `hw1`. */
export type HardwareIdScheme = 'hw1' | 'hw2';

/**
 * This machine's hardware ID (docs/client.md, "Hardware ID"): `hw2-` on Linux, where its
 * sources hold still whatever the network does; `hw1-` elsewhere, and on a Linux system
 * where no hw2 source can be read. `hw1` asks for the former derivation, as a client of an
 * older version derived it.
 */
export function deriveHardwareId(scheme: HardwareIdScheme = 'hw2'): string {
  if (scheme === 'hw2' && platform() === 'linux') {
    const id = deriveHardwareIdV2('/');
    if (id !== undefined) return id;
  }
  return deriveHardwareIdV1();
}

/**
 * The `hw1-` hardware ID, derived from stable machine attributes (docs/client.md, "Hardware ID"):
 * the OS machine id, the CPU model, the MAC addresses of physical interfaces, and disk
 * serial numbers where readable. Only a SHA-256 of them leaves this function, never the
 * raw values. The same machine gives the same ID across restarts; containers, VMs and a
 * changed network card may not, which is why applications there should set their own.
 * Interfaces are those os.networkInterfaces() lists: up, running and with an address, so
 * an interface that goes down or loses its link or address changes the ID (documented;
 * kept, since counting it would change the ID of every machine with an unused port).
 */
export function deriveHardwareIdV1(sources: HardwareSources = systemSources): string {
  const attributes = collectAttributes(sources);
  const digest = createHash('sha256').update(`license-server/hardware-id/v1\n${attributes.join('\n')}`, 'utf8').digest('hex');
  return `hw1-${digest.slice(0, 40)}`;
}

export interface HardwareSources {
  readFile(path: string): string | undefined;
  listDir(path: string): string[];
  cpuModel(): string | undefined;
  interfaces(): Array<{ name: string; mac: string; internal: boolean }>;
  hostname(): string;
  platform(): string;
}

export const systemSources: HardwareSources = {
  readFile: (file) => {
    try {
      return readFileSync(file, 'utf8').trim();
    } catch {
      return undefined;
    }
  },
  listDir: (dir) => {
    try {
      return readdirSync(dir);
    } catch {
      return [];
    }
  },
  cpuModel: () => cpus()[0]?.model.trim(),
  interfaces: () =>
    Object.entries(networkInterfaces()).flatMap(([name, addresses]) =>
      (addresses ?? []).map((address) => ({ name, mac: address.mac, internal: address.internal })),
    ),
  hostname,
  platform,
};

// Interfaces that come and go with containers, VPNs and hypervisors.
const VIRTUAL_INTERFACE = /^(lo|docker|veth|br-|virbr|vmnet|vboxnet|tun|tap|wg|zt|cni|flannel|cali|kube|podman|lxc|utun|awdl|llw|bridge)/i;

/** Sorted `kind=value` lines; exported for the tests. */
export function collectAttributes(sources: HardwareSources): string[] {
  const attributes = new Set<string>();
  const machineId = sources.readFile('/etc/machine-id') || sources.readFile('/var/lib/dbus/machine-id');
  if (machineId) attributes.add(`machine-id=${machineId}`);
  const cpu = sources.cpuModel();
  if (cpu) attributes.add(`cpu=${cpu}`);
  for (const { name, mac, internal } of sources.interfaces()) {
    if (internal || VIRTUAL_INTERFACE.test(name) || !/^([0-9a-f]{2}:){5}[0-9a-f]{2}$/i.test(mac) || mac === '00:00:00:00:00:00') continue;
    // The locally administered bit marks randomised and virtual addresses.
    if ((Number.parseInt(mac.slice(0, 2), 16) & 0x02) !== 0) continue;
    attributes.add(`mac=${mac.toLowerCase()}`);
  }
  for (const disk of sources.listDir('/sys/block')) {
    if (/^(loop|ram|zram|dm-|md|sr)/.test(disk)) continue;
    const serial = sources.readFile(`/sys/block/${disk}/device/serial`) || sources.readFile(`/sys/block/${disk}/device/wwid`);
    if (serial) attributes.add(`disk=${serial}`);
  }
  // Nothing stable could be read (an unusual OS or a locked-down sandbox): fall back to the name.
  if (attributes.size === 0) attributes.add(`host=${sources.platform()}/${sources.hostname()}`);
  return [...attributes].sort();
}
