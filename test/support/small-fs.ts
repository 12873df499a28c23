import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, statfsSync, writeSync } from 'node:fs';
import path from 'node:path';

/**
 * Small tmpfs mounts that a test fills to the brim and gives room again: a full disk for
 * real, as the kernel refuses writes (ENOSPC). Mounting needs root, as CI has: elsewhere
 * the test is skipped, loudly; under CI=true a machine that cannot mount fails it.
 */
export interface SmallFs {
  /** A tmpfs of `kib` KiB on `dir` (created); `options` such as `uid=...,gid=...`. */
  mount(context: Mocha.Context, dir: string, kib: number, options?: string): string;
  resize(dir: string, kib: number): void;
  /** Unmounts everything mounted, last first. */
  unmountAll(): void;
}

export function smallFileSystems(): SmallFs {
  const mounted: string[] = [];
  return {
    mount(context, dir, kib, options = 'mode=0700') {
      mkdirSync(dir, { recursive: true });
      try {
        execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${kib}k,${options}`, 'tmpfs', dir], { stdio: 'pipe' });
      } catch (error) {
        if (process.env.CI === 'true') throw new Error(`cannot mount a small file system for this test: ${String(error)}`);
        console.warn('    (skipping: cannot mount a tmpfs here)');
        context.skip();
      }
      mounted.push(dir);
      return dir;
    },
    resize(dir, kib) {
      execFileSync('mount', ['-o', `remount,size=${kib}k`, dir], { stdio: 'pipe' });
    },
    unmountAll() {
      for (const dir of mounted.splice(0).reverse()) execFileSync('umount', [dir], { stdio: 'pipe' });
    },
  };
}

export function usedKib(dir: string): number {
  const fs = statfsSync(dir);
  return ((fs.blocks - fs.bfree) * fs.bsize) / 1024;
}

/** Leaves `dir`'s file system with no free block; returns what gives the room back. */
export function fillToTheBrim(dir: string): () => void {
  const filler = path.join(dir, 'filler');
  const fd = openSync(filler, 'w');
  try {
    for (;;) writeSync(fd, Buffer.alloc(4096));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOSPC') throw error;
  } finally {
    closeSync(fd);
  }
  assert.equal(statfsSync(dir).bavail, 0, 'the file system is full');
  return () => rmSync(filler);
}
