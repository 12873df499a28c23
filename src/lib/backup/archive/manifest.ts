import { LicenseServerError } from '../../errors.js';
import type { Engine } from '../../storage/types.js';
import type { KeySummary } from '../signing-key-carry.js';
import { ENTRY_NAMES, type EntryName, type FileDigest } from './archive.js';

export const BACKUP_FORMAT = 'license-server-backup';
export const BACKUP_FORMAT_VERSION = 1;
export const TRIGGERS = ['manual', 'scheduled', 'pre-restore'] as const;
export type Trigger = (typeof TRIGGERS)[number];

export interface ManifestEntry extends FileDigest {
  readonly name: EntryName;
}

/** The first entry of every archive (docs/backup-format.md, "manifest.json"). */
export interface Manifest {
  readonly format: typeof BACKUP_FORMAT;
  readonly format_version: number;
  readonly backup_id: string;
  readonly created_at: string;
  readonly tool_version: string;
  readonly engine: Engine;
  readonly schema_version: number;
  readonly trigger: Trigger;
  readonly entries: readonly ManifestEntry[];
  /**
   * The store's signing keys when the backup began, for telling before a restore what it
   * does to the key set (restore-preview.ts); the restore itself reads the database entry.
   * Absent from backups of earlier releases.
   */
  readonly signing_keys?: readonly KeySummary[];
}

/** `20261122T101500123Z-3f9a1c`: sorts by time, safe in a file name and a URL. */
export const BACKUP_ID = /^\d{8}T\d{9}Z-[0-9a-f]{6}$/;

/** RFC 3339 in UTC, as `Date.prototype.toISOString` writes it; the fraction is optional. */
const UTC_TIMESTAMP = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?Z$/;

function isUtcTimestamp(value: unknown): boolean {
  if (typeof value !== 'string') return false;
  const match = UTC_TIMESTAMP.exec(value);
  if (!match) return false;
  const [, year, month, day, hour, minute, second] = match.map(Number) as number[];
  const date = new Date(Date.UTC(year!, month! - 1, day!, hour!, minute!, second!));
  // A real calendar date and time: Date.UTC rolls 2026-02-30 over into March.
  return date.getUTCFullYear() === year && date.getUTCMonth() === month! - 1 && date.getUTCDate() === day && date.getUTCHours() === hour
    && date.getUTCMinutes() === minute && date.getUTCSeconds() === second;
}

/**
 * The manifest as docs/backup-format.md ("manifest.json") pins it: every member of the table
 * required with its form, members the table does not name ignored (at the top and in entries),
 * member order and layout free. A format_version above 1 is a newer format; any other value
 * that is not 1 is not a manifest of any version.
 */
export function parseManifest(text: string): Manifest {
  const invalid = (reason: string): never => {
    throw new LicenseServerError('BACKUP_INVALID', `the backup manifest is invalid: ${reason}`);
  };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return invalid('it is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return invalid('it is not an object');
  const m = value as Record<string, unknown>;
  if (m.format !== BACKUP_FORMAT) invalid(`"format" is not ${BACKUP_FORMAT}`);
  if (!Number.isSafeInteger(m.format_version) || (m.format_version as number) < 1) invalid('"format_version" is not a positive integer');
  if (m.format_version !== BACKUP_FORMAT_VERSION) {
    throw new LicenseServerError('BACKUP_UNSUPPORTED', `backup format version ${String(m.format_version)} is not supported (this license-server reads ${BACKUP_FORMAT_VERSION})`);
  }
  if (typeof m.backup_id !== 'string' || !BACKUP_ID.test(m.backup_id)) invalid('"backup_id" is malformed');
  if (!isUtcTimestamp(m.created_at)) invalid('"created_at" is not an RFC 3339 UTC timestamp');
  if (typeof m.tool_version !== 'string') invalid('"tool_version" is not a string');
  if (m.engine !== 'sqlite' && m.engine !== 'postgres') invalid('"engine" is neither sqlite nor postgres');
  if (!Number.isSafeInteger(m.schema_version) || (m.schema_version as number) < 1) invalid('"schema_version" is not a positive integer');
  if (!(TRIGGERS as readonly string[]).includes(m.trigger as string)) invalid('"trigger" is unknown');
  if (!Array.isArray(m.entries)) return invalid('"entries" is not an array');
  const names = new Set<string>();
  for (const entry of m.entries as Array<Record<string, unknown>>) {
    if (!(ENTRY_NAMES as readonly string[]).includes(entry?.name as string) || entry.name === 'manifest.json') invalid('an entry has an unknown name');
    if (names.has(entry.name as string)) invalid(`entry ${String(entry.name)} is listed twice`);
    names.add(entry.name as string);
    if (!Number.isSafeInteger(entry.size) || (entry.size as number) < 0) invalid(`entry ${String(entry.name)} has no size`);
    if (typeof entry.sha256 !== 'string' || !/^[0-9a-f]{64}$/.test(entry.sha256)) invalid(`entry ${String(entry.name)} has no SHA-256`);
  }
  if (m.signing_keys !== undefined) {
    const states = ['next', 'active', 'verify-only', 'retired'];
    const valid = Array.isArray(m.signing_keys) && (m.signing_keys as Array<Record<string, unknown>>).every(
      (key) => typeof key?.key_id === 'string' && /^[0-9a-f]{16}$/.test(key.key_id) && states.includes(key.state as string) && typeof key.created_at === 'string',
    );
    if (!valid) invalid('"signing_keys" is malformed');
  }
  const database = m.engine === 'sqlite' ? 'database/sqlite.db' : 'database/postgres.sql';
  if (!names.has(database)) invalid(`it lists no ${database}`);
  return value as Manifest;
}
