import { readFile } from 'node:fs/promises';
import { decodeLicenseFile } from '../lib/offline/format.js';
import { deriveHardwareId } from './hardware-id.js';
import type { ClientStore } from './store.js';
import type { Save } from './trust.js';

export interface PreviousIdSources {
  /** The ID in use. */
  readonly hardwareId: string;
  /** True when the client derived it (no `hardwareId` option). */
  readonly derived: boolean;
  readonly store: ClientStore;
  /** Offline mode on: the cache directory and the `.lic` file are this client's. */
  readonly offlineEnabled: boolean;
  readonly licenseFile: string | undefined;
  /** For tests: the hw1 derivation of this machine. */
  readonly deriveHw1?: () => string;
}

/**
 * The `hw1-` ID this machine used before it derived the `hw2-` ID in use (docs/client.md,
 * "Moving from hw1 to hw2"), or undefined (the ID was set by the application, or is not
 * hw2). The first of:
 * 1. hardware-id.json, when it names the ID in use: its `previous_hardware_id`; when it
 *    names a `hw1-` ID: that one (this version ran with hw1 before);
 * 2. the `hardware_id` of the cached grace token, as an older version left it: the ID the
 *    server last admitted;
 * 3. the `hardware_id` of the `.lic` file: the ID a file was checked out for;
 * 4. the hw1 derivation now (an online-only client keeps no state to read).
 * With offline mode on, the answer is written to hardware-id.json at once, so that it no
 * longer depends on what hw1 would say later (hw1 moves with the network). Never throws.
 */
export async function findPreviousHardwareId(sources: PreviousIdSources, save: Save): Promise<string | undefined> {
  const { hardwareId, store, offlineEnabled } = sources;
  if (!sources.derived || !hardwareId.startsWith('hw2-')) return undefined;
  const record = offlineEnabled ? await store.readHardwareIds() : undefined;
  if (record?.hardware_id === hardwareId) return hw1(record.previous_hardware_id);
  const previous =
    hw1(record?.hardware_id) ??
    hw1(record?.previous_hardware_id) ??
    (offlineEnabled ? hw1(graceTokenHardwareId((await store.readGrace())?.token)) : undefined) ??
    (offlineEnabled ? hw1(await licenseFileHardwareId(sources.licenseFile)) : undefined) ??
    derivedHw1(sources.deriveHw1);
  if (offlineEnabled) {
    await save(() => store.writeHardwareIds(previous === undefined ? { hardware_id: hardwareId } : { hardware_id: hardwareId, previous_hardware_id: previous }));
  }
  return previous;
}

function hw1(id: string | undefined): string | undefined {
  return id !== undefined && /^hw1-[0-9a-f]{40}$/.test(id) ? id : undefined;
}

/** The `hardware_id` claim of a grace token, unverified: a hint of what the server admitted, nothing is trusted on it. */
function graceTokenHardwareId(token: string | undefined): string | undefined {
  try {
    const claims = JSON.parse(Buffer.from(token?.split('.')[1] ?? '', 'base64url').toString('utf8')) as { hardware_id?: unknown };
    return typeof claims.hardware_id === 'string' ? claims.hardware_id : undefined;
  } catch {
    return undefined;
  }
}

async function licenseFileHardwareId(file: string | undefined): Promise<string | undefined> {
  if (file === undefined) return undefined;
  try {
    return decodeLicenseFile(await readFile(file)).payload.hardware_id;
  } catch {
    return undefined;
  }
}

function derivedHw1(derive: (() => string) | undefined): string | undefined {
  try {
    return (derive ?? (() => deriveHardwareId('hw1')))();
  } catch {
    return undefined;
  }
}
