import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { writeFileDurably } from '../lib/files/durable-write.js';
import type { LicenseFileEntitlement } from '../lib/offline/format.js';

export interface CachedGrace {
  readonly token: string;
  readonly license_id: string;
  readonly entitlements: readonly LicenseFileEntitlement[];
  readonly saved_at: string;
}

export interface QueuedUsage {
  readonly entitlement_code: string;
  readonly quantity: number;
  readonly occurred_at: string;
  readonly idempotency_key: string;
}

/**
 * What the client keeps on disk, in a 0700 directory per license key under cacheDir:
 * `grace.json` (the last grace token and its entitlements), `clock.json` (the latest
 * trusted time seen) and `queue/` (usage reports waiting for the server, one file each).
 * Every file is written whole or not at all (write .partial, fsync, rename, fsync dir),
 * readable by the user only. A file that does not parse counts as absent.
 */
export class ClientStore {
  readonly dir: string;
  private readonly queueDir: string;

  constructor(cacheDir: string, licenseKey: string) {
    const id = createHash('sha256').update(licenseKey.toUpperCase().replace(/[\s-]/g, ''), 'utf8').digest('hex').slice(0, 16);
    this.dir = path.join(cacheDir, id);
    this.queueDir = path.join(this.dir, 'queue');
  }

  async readGrace(): Promise<CachedGrace | undefined> {
    const value = await this.readJson('grace.json');
    if (!value || typeof value.token !== 'string' || typeof value.license_id !== 'string' || !Array.isArray(value.entitlements)) return undefined;
    return value as unknown as CachedGrace;
  }

  writeGrace(entry: CachedGrace): Promise<void> {
    return this.writeJson('grace.json', entry);
  }

  async deleteGrace(): Promise<void> {
    await rm(path.join(this.dir, 'grace.json'), { force: true });
  }

  /** Milliseconds since the epoch of the latest time the client had reason to trust. */
  async readTrustedTime(): Promise<number | undefined> {
    const value = await this.readJson('clock.json');
    return typeof value?.latest === 'number' && Number.isFinite(value.latest) ? value.latest : undefined;
  }

  writeTrustedTime(latest: number): Promise<void> {
    return this.writeJson('clock.json', { latest });
  }

  /** Appends a report; file names sort in the order the reports were made. */
  async enqueue(report: QueuedUsage): Promise<void> {
    await mkdir(this.queueDir, { recursive: true, mode: 0o700 });
    const name = `${String(Date.parse(report.occurred_at)).padStart(15, '0')}-${process.hrtime.bigint().toString().padStart(20, '0')}-${randomUUID()}.json`;
    await writeFileDurably(path.join(this.queueDir, name), JSON.stringify(report), { mode: 0o600 });
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

  private async readJson(name: string): Promise<Record<string, unknown> | undefined> {
    try {
      const value: unknown = JSON.parse(await readFile(path.join(this.dir, name), 'utf8'));
      return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
    } catch {
      return undefined;
    }
  }

  private async writeJson(name: string, value: unknown): Promise<void> {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await writeFileDurably(path.join(this.dir, name), JSON.stringify(value), { overwrite: true, mode: 0o600 });
  }
}
