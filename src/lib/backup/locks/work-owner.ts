import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
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
  /**
   * When the process started (processStart): with it, a pid taken by another process since
   * reads as gone. Where it is absent (a name without it, a system without /proc), the pid
   * alone is checked.
   */
  readonly start?: string;
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
 * 'gone' only when the owner ran on this host and no process with its pid (and start, when
 * known) runs now. A pid reused by an unrelated process reads as alive when the start is not
 * known: the leftover then waits, it is never taken early. With the start, a process that
 * reuses the pid does not pass for the owner: a container's daemon is pid 1 after every
 * restart, and must not take its dead predecessor's work for its own.
 */
export function ownerState(owner: WorkOwner): 'alive' | 'gone' | 'other-host' {
  if (owner.host !== hostTag()) return 'other-host';
  if (owner.pid !== process.pid) {
    try {
      process.kill(owner.pid, 0);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EPERM') return 'gone';
    }
  }
  const stat = owner.pid === process.pid ? undefined : procStat(owner.pid);
  // Killed and not reaped yet: a zombie answers signal 0, but has ended all the same.
  if (stat?.state === 'Z') return 'gone';
  if (owner.start === undefined) return 'alive';
  const start = owner.pid === process.pid ? processStart() : stat?.start;
  return start === undefined || start === owner.start ? 'alive' : 'gone';
}

/**
 * When process `pid` started, in clock ticks since the host booted (field 22 of
 * /proc/<pid>/stat): the same for the life of the process, different for any later one with
 * its pid. Undefined where there is no /proc (macOS) or no such process.
 */
export function processStart(pid: number = process.pid): string | undefined {
  if (pid !== process.pid) return procStat(pid)?.start;
  if (ownStart === null) ownStart = procStat(pid)?.start;
  return ownStart;
}

let ownStart: string | undefined | null = null;

/** The state letter (field 3) and the start (field 22) of /proc/<pid>/stat, or undefined. */
function procStat(pid: number): { readonly state: string; readonly start: string | undefined } | undefined {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // The command name, in parentheses, may hold spaces and parentheses itself: count from after it.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const start = fields[19];
  return { state: fields[0] ?? '', start: start && /^\d+$/.test(start) ? start : undefined };
}
