import { open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DrillRecord } from './drill.js';

/** The newest drills kept in the history; older ones are dropped as a new one is recorded. */
export const DRILLS_KEPT = 30;

/** Beside the backups, so that the command line and the daemon of one host share it. */
export function drillHistoryFile(backupDirectory: string): string {
  return path.join(backupDirectory, 'drill-history.json');
}

/** The recorded drills, newest first; none when the file is missing or unreadable. */
export async function readDrillHistory(backupDirectory: string): Promise<DrillRecord[]> {
  let text: string;
  try {
    text = await readFile(drillHistoryFile(backupDirectory), 'utf8');
  } catch {
    return [];
  }
  try {
    const parsed = JSON.parse(text) as { drills?: unknown };
    return Array.isArray(parsed.drills) ? (parsed.drills as DrillRecord[]) : [];
  } catch {
    return [];
  }
}

/**
 * Adds `drill` to the history, whole or not at all: written to a file of its own, flushed,
 * then renamed over the old one. Two hosts' drills racing lose one record, never the file.
 */
export async function recordDrill(backupDirectory: string, drill: DrillRecord): Promise<void> {
  const drills = [drill, ...(await readDrillHistory(backupDirectory))].slice(0, DRILLS_KEPT);
  const file = drillHistoryFile(backupDirectory);
  const next = `${file}.${process.pid}.new`;
  const handle = await open(next, 'w', 0o600);
  try {
    await handle.writeFile(`${JSON.stringify({ drills }, null, 2)}\n`);
    await handle.sync();
  } catch (error) {
    await handle.close();
    await rm(next, { force: true });
    throw error;
  }
  await handle.close();
  await rename(next, file);
}

/** The newest successful drill's finish, and the newest drill, for the metrics. */
export function drillFigures(drills: readonly DrillRecord[]): { lastRun: DrillRecord | undefined; lastSuccessAt: string | undefined } {
  return { lastRun: drills[0], lastSuccessAt: drills.find((drill) => drill.ok)?.finished_at };
}
