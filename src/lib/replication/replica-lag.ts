import { holds, type WalPosition } from './replica-position.js';

/** Looks that found the database moved, an hour's worth at one a second; past that, those between the oldest and the newest thin out. */
const SAMPLES_KEPT = 3600;

/**
 * When the database got ahead of a replica, from where Litestream's shadow WAL was at each
 * look: a replica is behind since the oldest look that found the database further than the
 * replica is now. Under steady writes the replica is never level with the database at the
 * moment of a look, yet it follows a second or two behind; a lag counted from the first look
 * that found it behind (and reset only when one finds it level) would grow without end and
 * raise a stall that is none.
 */
export class ReplicaLag {
  private samples: Array<{ readonly at: number; readonly position: WalPosition }> = [];

  /** A look at the shadow WAL's end, at `at`. A new generation starts the looks anew: it holds the database whole. */
  observe(at: number, local: WalPosition): void {
    const last = this.samples.at(-1);
    if (last && last.position.generation !== local.generation) this.samples = [];
    else if (last && last.position.index === local.index && last.position.offset === local.offset) return;
    this.samples.push({ at, position: local });
    // The oldest look stays: it says since when a replica that holds none of them is behind.
    if (this.samples.length > SAMPLES_KEPT) this.samples.splice(1, 1);
  }

  /** When the database was first seen further than `replica`; undefined when the replica holds everything seen. */
  behindSince(replica: WalPosition): number | undefined {
    const first = this.samples.find((sample) => !holds(replica, sample.position));
    return first?.at;
  }

  /** Drops the looks every replica holds, but the newest: they can no longer say when one fell behind. */
  forget(replicas: ReadonlyArray<WalPosition | undefined>): void {
    let held = 0;
    while (held < this.samples.length - 1 && replicas.every((replica) => replica !== undefined && holds(replica, this.samples[held]!.position))) held += 1;
    if (held > 0) this.samples.splice(0, held);
  }

  /** A restored database: what was seen describes another file. */
  clear(): void {
    this.samples = [];
  }
}
