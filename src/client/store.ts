import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from '../lib/files/durable-write.js';
import { describeFsError } from '../lib/fs-errors.js';
import type { LicenseFileEntitlement } from '../lib/offline/format.js';

export interface CachedGrace {
  readonly token: string;
  readonly license_id: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
  readonly saved_at: string;
}

/**
 * An activation request waiting for its file (docs/client.md, "Activation by request file"):
 * `pending-request.json`. `private_key` is the X25519 private key of `machine_key`; the file
 * is the user's alone (0600) and no secret of it is ever in the request.
 */
export interface PendingRequestRecord {
  readonly nonce: string;
  readonly machine_key: string;
  readonly private_key: string;
  readonly hardware_id: string;
  readonly created_at: string;
  /** Requests this one replaced, newest first: a file answering one is "for an older request". */
  readonly superseded: ReadonlyArray<{ readonly nonce: string; readonly created_at: string }>;
}

/** The key pair of the request whose file is installed: `machine-key.json` (0600). */
export interface MachineKeyRecord {
  readonly request_nonce: string;
  readonly machine_key: string;
  readonly private_key: string;
  readonly hardware_id: string;
  readonly installed_at: string;
}

/** The server's authoritative "not valid" (docs/client.md, "Revocation"). */
export interface Verdict {
  /** The server's reason, e.g. LICENSE_INACTIVE. */
  readonly reason: string;
  readonly message: string;
  /** The server's time of the answer, RFC 3339. */
  readonly server_time: string;
}

/**
 * hardware-id.json: the hardware ID this client used last, and the `hw1-` ID it used before
 * it derived `hw2-` ones (docs/client.md, "Moving from hw1 to hw2").
 */
export interface HardwareIdRecord {
  readonly hardware_id: string;
  readonly previous_hardware_id?: string;
}

/** What clock.json says: a time, nothing (never written, or deleted), or something unreadable. */
export type ClockRecord =
  | { readonly kind: 'trusted'; readonly latest: number; readonly revoked?: Verdict }
  | { readonly kind: 'missing' }
  | { readonly kind: 'damaged'; readonly why: string };

export interface QueuedUsage {
  readonly entitlement_code: string;
  readonly quantity: number;
  readonly occurred_at: string;
  readonly idempotency_key: string;
}

/**
 * What the client keeps on disk, in a 0700 directory per license key under cacheDir:
 * `grace.json` (the last grace token and its entitlements), `clock.json` (the latest
 * trusted time seen, and a copy of a revocation), `revoked.json` (the server's last
 * authoritative "not valid"), `keys.json` (signing keys a key refresh accepted),
 * `hardware-id.json` (the ID in use and the `hw1-` one used before), `pending-request.json` (an activation
 * request waiting for its file) and `machine-key.json` (the key pair of the request whose file is installed), `queue/` (usage reports waiting for the server, one file each)
 * and `rejected/`. Every file is written whole or not at all (write .partial, fsync, rename,
 * fsync dir), readable by the user only. Writes throw CacheWriteError; reads never throw.
 */
export class ClientStore {
  readonly dir: string;
  private readonly queueDir: string;

  constructor(cacheDir: string, licenseKey: string) {
    const id = createHash('sha256').update(licenseKey.toUpperCase().replace(/[\s-]/g, ''), 'utf8').digest('hex').slice(0, 16);
    this.dir = path.join(cacheDir, id);
    this.queueDir = path.join(this.dir, 'queue');
  }

  file(name: string): string {
    return path.join(this.dir, name);
  }

  /** A grace.json that does not parse counts as absent: without a token the tier refuses anyway. */
  async readGrace(): Promise<CachedGrace | undefined> {
    const read = await this.readJson('grace.json');
    const value = read.kind === 'object' ? read.value : undefined;
    if (!value || typeof value.token !== 'string' || typeof value.license_id !== 'string' || !Array.isArray(value.entitlements)) return undefined;
    return value as unknown as CachedGrace;
  }

  writeGrace(entry: CachedGrace): Promise<void> {
    return this.writeJson('grace.json', entry);
  }

  deleteGrace(): Promise<void> {
    return this.delete('grace.json');
  }

  async readClock(): Promise<ClockRecord> {
    const read = await this.readJson('clock.json');
    if (read.kind === 'missing') return read;
    if (read.kind === 'damaged') return read;
    const { latest, revoked } = read.value;
    if (typeof latest !== 'number' || !Number.isFinite(latest)) return { kind: 'damaged', why: 'it holds no time' };
    return { kind: 'trusted', latest, ...(isVerdict(revoked) ? { revoked } : {}) };
  }

  writeClock(latest: number, revoked: Verdict | undefined): Promise<void> {
    return this.writeJson('clock.json', revoked ? { latest, revoked } : { latest });
  }

  /** The verdict in revoked.json; 'damaged' when the file is there but cannot be read as one. */
  async readVerdict(): Promise<Verdict | 'damaged' | undefined> {
    const read = await this.readJson('revoked.json');
    if (read.kind === 'missing') return undefined;
    return read.kind === 'object' && isVerdict(read.value) ? read.value : 'damaged';
  }

  writeVerdict(verdict: Verdict): Promise<void> {
    return this.writeJson('revoked.json', verdict);
  }

  deleteVerdict(): Promise<void> {
    return this.delete('revoked.json');
  }

  /** keys.json as written by writeKeys, or undefined when absent or unreadable (it only ever adds keys the trust rule re-checks). */
  async readKeys(): Promise<Record<string, unknown> | undefined> {
    const read = await this.readJson('keys.json');
    return read.kind === 'object' ? read.value : undefined;
  }

  /** The keys the last refresh accepted, with their endorsements, and when it was made (docs/client.md, "Key refresh"). */
  writeKeys(record: { readonly fetched_at: string; readonly keys: readonly unknown[] }): Promise<void> {
    return this.writeJson('keys.json', record);
  }

  /** hardware-id.json, or undefined when absent or unreadable. */
  async readHardwareIds(): Promise<HardwareIdRecord | undefined> {
    const read = await this.readJson('hardware-id.json');
    if (read.kind !== 'object' || typeof read.value.hardware_id !== 'string') return undefined;
    const previous = read.value.previous_hardware_id;
    return { hardware_id: read.value.hardware_id, ...(typeof previous === 'string' ? { previous_hardware_id: previous } : {}) };
  }

  writeHardwareIds(record: HardwareIdRecord): Promise<void> {
    return this.writeJson('hardware-id.json', record);
  }

  /** pending-request.json, or undefined when there is none (or it cannot be read as one). */
  async readPendingRequest(): Promise<PendingRequestRecord | undefined> {
    const read = await this.readJson('pending-request.json');
    if (read.kind !== 'object') return undefined;
    const { nonce, machine_key: machineKey, private_key: privateKey, hardware_id: hardwareId, created_at: createdAt, superseded } = read.value;
    if (![nonce, machineKey, privateKey, hardwareId, createdAt].every((value) => typeof value === 'string')) return undefined;
    const older = Array.isArray(superseded)
      ? superseded.filter((entry): entry is { nonce: string; created_at: string } => typeof entry?.nonce === 'string' && typeof entry?.created_at === 'string')
      : [];
    return { ...(read.value as unknown as PendingRequestRecord), superseded: older };
  }

  writePendingRequest(record: PendingRequestRecord): Promise<void> {
    return this.writeJson('pending-request.json', record);
  }

  deletePendingRequest(): Promise<void> {
    return this.delete('pending-request.json');
  }

  async readMachineKey(): Promise<MachineKeyRecord | undefined> {
    const read = await this.readJson('machine-key.json');
    if (read.kind !== 'object') return undefined;
    const value = read.value;
    return ['request_nonce', 'machine_key', 'private_key', 'hardware_id', 'installed_at'].every((name) => typeof value[name] === 'string')
      ? (value as unknown as MachineKeyRecord)
      : undefined;
  }

  writeMachineKey(record: MachineKeyRecord): Promise<void> {
    return this.writeJson('machine-key.json', record);
  }

  /** Whether a file is there at all, readable or not. */
  async has(name: string): Promise<boolean> {
    try {
      await stat(this.file(name));
      return true;
    } catch (error) {
      return !isAbsence(error);
    }
  }

  /** Appends a report; file names sort in the order the reports were made. */
  async enqueue(report: QueuedUsage): Promise<void> {
    await this.makeDir(this.queueDir);
    const name = `${String(Date.parse(report.occurred_at)).padStart(15, '0')}-${process.hrtime.bigint().toString().padStart(20, '0')}-${randomUUID()}.json`;
    await this.write(path.join(this.queueDir, name), JSON.stringify(report), false);
  }

  async queued(): Promise<Array<{ file: string; report: QueuedUsage }>> {
    let names: string[];
    try {
      names = (await readdir(this.queueDir)).filter((name) => name.endsWith('.json')).sort();
    } catch {
      return [];
    }
    const entries = [];
    for (const name of names) {
      const file = path.join(this.queueDir, name);
      try {
        entries.push({ file, report: JSON.parse(await readFile(file, 'utf8')) as QueuedUsage });
      } catch {
        // A file that cannot be read back is set aside, not retried for ever.
        await this.setAside(file);
      }
    }
    return entries;
  }

  async dequeue(file: string): Promise<void> {
    await rm(file, { force: true });
  }

  /** Keeps a report the server refused for good (e.g. over its limit) for the operator to see. */
  async setAside(file: string): Promise<void> {
    const rejected = path.join(this.dir, 'rejected');
    await mkdir(rejected, { recursive: true, mode: 0o700 });
    await rename(file, path.join(rejected, path.basename(file))).catch(() => rm(file, { force: true }));
  }

  private async readJson(
    name: string,
  ): Promise<{ kind: 'object'; value: Record<string, unknown> } | { kind: 'missing' } | { kind: 'damaged'; why: string }> {
    let text: string;
    try {
      text = await readFile(this.file(name), 'utf8');
    } catch (error) {
      return isAbsence(error) ? { kind: 'missing' } : { kind: 'damaged', why: describeFsError(error) };
    }
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { kind: 'damaged', why: 'it is not JSON' };
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return { kind: 'damaged', why: 'it is not a JSON object' };
    return { kind: 'object', value: value as Record<string, unknown> };
  }

  private async writeJson(name: string, value: unknown): Promise<void> {
    await this.makeDir(this.dir);
    await this.write(this.file(name), JSON.stringify(value));
  }

  private async write(file: string, data: string, overwrite = true): Promise<void> {
    try {
      await writeFileDurably(file, data, { overwrite, mode: 0o600 });
    } catch (error) {
      // writeFileDurably's message already names the file and the reason.
      throw new CacheWriteError(error instanceof Error ? error.message : String(error));
    }
  }

  private async makeDir(dir: string): Promise<void> {
    try {
      await mkdir(dir, { recursive: true, mode: 0o700 });
    } catch (error) {
      throw new CacheWriteError(`cannot create the cache directory ${dir}: ${describeFsError(await mkdirFailure(dir, error))}`);
    }
  }

  private async delete(name: string): Promise<void> {
    try {
      await rm(this.file(name), { force: true });
    } catch (error) {
      if (!isAbsence(error)) throw new CacheWriteError(`cannot remove ${this.file(name)}: ${describeFsError(error)}`);
    }
  }
}

/** A cache file that could not be written; the client reports it as a warning, never as a failure. */
export class CacheWriteError extends Error {
  override readonly name = 'CacheWriteError';
}

/**
 * The real reason a recursive mkdir failed. Node reports ENOENT where the kernel said EROFS
 * (nodejs/node#47098), so a read-only disk would read "no such file or directory"; making the
 * first missing level alone gets the kernel's own answer.
 */
async function mkdirFailure(dir: string, error: unknown): Promise<unknown> {
  if ((error as NodeJS.ErrnoException | undefined)?.code !== 'ENOENT') return error;
  const exists = (file: string) => stat(file).then(() => true, () => false);
  let missing = dir;
  while (path.dirname(missing) !== missing && !(await exists(path.dirname(missing)))) missing = path.dirname(missing);
  try {
    await mkdir(missing, { mode: 0o700 });
  } catch (real) {
    return real;
  }
  return error;
}

/** Not there: no file, or a parent that is not a directory (so nothing was ever written there). */
function isAbsence(error: unknown): boolean {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

function isVerdict(value: unknown): value is Verdict {
  if (typeof value !== 'object' || value === null) return false;
  const record = value as Record<string, unknown>;
  return typeof record.reason === 'string' && typeof record.message === 'string' && typeof record.server_time === 'string';
}
