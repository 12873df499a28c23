import { createHash, createHmac } from 'node:crypto';
import { lstatSync, readdirSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';

/**
 * The application id of `sd_id128_get_machine_app_specific` for this product: the 16 bytes
 * of the UUID 6b2df99a-b35d-4cda-abef-ec080a35b4c9 (docs/client.md, "hw2"). Fixed for ever:
 * a new value would give every machine a new ID.
 */
export const MACHINE_APP_ID = '6b2df99ab35d4cdaabefec080a35b4c9';

const DOMAIN = 'license-server/hardware-id/v2\n';

/**
 * The `hw2-` hardware ID of the Linux machine whose file system is at `root` (docs/client.md,
 * "Hardware ID"): "hw2-" and the 64 hex digits of SHA-256 over the domain line and the sorted
 * attribute lines of collectAttributesV2. Undefined when no source can be read (another OS,
 * a sandbox without /etc and /sys): the caller falls back to hw1. Only the hash leaves.
 */
export function deriveHardwareIdV2(root = '/'): string | undefined {
  const lines = collectAttributesV2(root);
  if (lines.length === 0) return undefined;
  return `hw2-${createHash('sha256').update(DOMAIN + lines.join('\n'), 'utf8').digest('hex')}`;
}

/**
 * The attribute lines, deduplicated and sorted by their UTF-8 bytes; exported for the tests
 * and vectors. The raw machine id is not among them: only its application-specific form.
 */
export function collectAttributesV2(root = '/'): string[] {
  const at = (...parts: string[]) => path.join(root, ...parts);
  const lines = new Set<string>();
  const machineId = machineAppSpecificId(readValue(at('etc/machine-id')) ?? readValue(at('var/lib/dbus/machine-id')));
  if (machineId) lines.add(`machine-app-id=${machineId}`);
  // The DMI product UUID is not read: the kernel lets only root read it, so a service run as
  // root and the same application run by a user would derive two IDs (docs/client.md).
  for (const name of listDir(at('sys/class/net'))) {
    const mac = permanentMac(root, name);
    if (mac) lines.add(`mac=${mac}`);
  }
  for (const name of listDir(at('sys/block'))) {
    const serial = diskSerial(root, name);
    if (serial) lines.add(`disk=${serial}`);
  }
  return [...lines].sort((a, b) => Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')));
}

/**
 * systemd's `sd_id128_get_machine_app_specific`: HMAC-SHA256 keyed with the 16 bytes of the
 * machine id over the 16 bytes of MACHINE_APP_ID, the first 16 bytes of it, with the UUID
 * version set to 4 (byte 6) and the variant to DCE (byte 8); 32 lowercase hex digits.
 * The machine id is 32 hex digits (or the same as a dashed UUID); anything else, or the
 * all-zero id, is no id (systemd writes "uninitialized" there during first boot).
 */
export function machineAppSpecificId(machineId: string | undefined): string | undefined {
  const hex = machineId?.replace(/^([0-9a-f]{8})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{4})-([0-9a-f]{12})$/i, '$1$2$3$4$5');
  if (hex === undefined || !/^[0-9a-f]{32}$/i.test(hex) || /^0+$/.test(hex)) return undefined;
  const key = Buffer.from(hex, 'hex');
  const id = createHmac('sha256', key).update(Buffer.from(MACHINE_APP_ID, 'hex')).digest().subarray(0, 16);
  key.fill(0);
  id[6] = (id[6]! & 0x0f) | 0x40;
  id[8] = (id[8]! & 0x3f) | 0x80;
  return id.toString('hex');
}

/**
 * The permanent address of a network card, whatever its state: one with a `device` link
 * (a physical device; virtual interfaces have none), not on USB (a dock or dongle comes and
 * goes), not wireless, from `permaddr` when the file is there, else `address` when
 * `addr_assign_type` is 0 (NET_ADDR_PERM). An address set by software (types 1-3) is not the
 * card's own, and sysfs does not give the permanent one then; a Wi-Fi card's address is
 * randomised at will (NetworkManager, iwd), so it would count before that and not after.
 */
function permanentMac(root: string, name: string): string | undefined {
  const dir = path.join(root, 'sys/class/net', name);
  const device = resolvedUnder(root, path.join(dir, 'device'));
  if (device === undefined || device.includes('/usb')) return undefined;
  if (exists(path.join(dir, 'wireless')) || exists(path.join(dir, 'phy80211'))) return undefined;
  const permanent = macAddress(readValue(path.join(dir, 'permaddr')));
  if (permanent) return permanent;
  return readValue(path.join(dir, 'addr_assign_type')) === '0' ? macAddress(readValue(path.join(dir, 'address'))) : undefined;
}

const SKIPPED_DISK = /^(loop|ram|zram|dm-|md|sr|nbd)/;

/**
 * The serial of a fixed disk: not removable, not a loop/RAM/mapper/RAID/optical/network
 * device, not virtual (under /sys/devices/virtual) and not on USB. The first of
 * device/serial (SCSI, NVMe's controller), serial (virtio), device/wwid and wwid that is set.
 */
function diskSerial(root: string, name: string): string | undefined {
  if (SKIPPED_DISK.test(name)) return undefined;
  const dir = path.join(root, 'sys/block', name);
  if (readValue(path.join(dir, 'removable')) !== '0') return undefined;
  const resolved = resolvedUnder(root, dir);
  if (resolved === undefined || resolved.includes('/devices/virtual/') || resolved.includes('/usb')) return undefined;
  for (const file of ['device/serial', 'serial', 'device/wwid', 'wwid']) {
    const value = readValue(path.join(dir, file));
    if (value) return value;
  }
  return undefined;
}

/** `aa:bb:...` in lowercase, or undefined for anything else and for an all-zero address. */
function macAddress(value: string | undefined): string | undefined {
  const mac = value?.toLowerCase();
  if (mac === undefined || !/^[0-9a-f]{2}(:[0-9a-f]{2}){5,19}$/.test(mac) || /^(00:?)+$/.test(mac)) return undefined;
  return mac;
}

/**
 * Where a path leads once every symbolic link is followed, as a path from `root` starting
 * with "/" (so that a test tree in /tmp/usb-... is not taken for a USB device); undefined
 * when it does not exist. `link` itself must be there (lstat), a link or not.
 */
function resolvedUnder(root: string, link: string): string | undefined {
  try {
    lstatSync(link);
    const real = realpathSync(link);
    const base = realpathSync(root);
    const relative = path.relative(base, real);
    return `/${relative.split(path.sep).join('/')}`;
  } catch {
    return undefined;
  }
}

/** There at all, a link or not (lstat). */
function exists(file: string): boolean {
  try {
    lstatSync(file);
    return true;
  } catch {
    return false;
  }
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A sysfs or /etc value: the file's bytes as UTF-8 with ASCII white space (space, tab, CR,
 * LF) cut from both ends; undefined when the file cannot be read, is empty then, is not
 * UTF-8 or holds a control character.
 */
function readValue(file: string): string | undefined {
  let text: string;
  try {
    text = decoder.decode(readFileSync(file));
  } catch {
    return undefined;
  }
  const value = text.replace(/^[ \t\r\n]+|[ \t\r\n]+$/g, '');
  if (value === '' || /[\u0000-\u001f\u007f]/.test(value)) return undefined;
  return value;
}

function listDir(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}
