import { createHash } from 'node:crypto';
import { hostname } from 'node:os';

/**
 * Work that may outlive a killed process (a validate's or a restore's staging directory, a
 * validate's scratch database) carries its maker in its name: a tag of the host and the
 * pid. Another process can then tell a dead maker's leftovers from a live one's work
 * without a lock: same host and the pid gone means dead. Another host's work cannot be
 * checked from here and is left alone.
 */
export interface WorkOwner {
  /** 8 hex digits of SHA-256 of the host name: fits in a file or database name whatever the host is called. */
  readonly host: string;
  readonly pid: number;
}

export function hostTag(name: string = hostname()): string {
  return createHash('sha256').update(name).digest('hex').slice(0, 8);
}

/** `.validate-1a2b3c4d-4242-`: a prefix for mkdtemp that names this process as the owner. */
export function ownedWorkPrefix(kind: 'validate' | 'restore'): string {
  return `.${kind}-${hostTag()}-${process.pid}-`;
}

/** The owner named in a work directory's name, or undefined for a name without one (made by an older release). */
export function ownerOfWork(name: string): WorkOwner | undefined {
  const match = /^\.(?:validate|restore)-([0-9a-f]{8})-(\d+)-/.exec(name);
  return match ? { host: match[1]!, pid: Number(match[2]) } : undefined;
}

/**
 * 'gone' only when the owner ran on this host and its pid is no longer running. A pid reused
 * by an unrelated process reads as alive: the leftover then waits, it is never taken early.
 */
export function ownerState(owner: WorkOwner): 'alive' | 'gone' | 'other-host' {
  if (owner.host !== hostTag()) return 'other-host';
  if (owner.pid === process.pid) return 'alive';
  try {
    process.kill(owner.pid, 0);
    return 'alive';
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM' ? 'alive' : 'gone';
  }
}
