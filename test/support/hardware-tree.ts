import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** A tree of test/vectors/hardware-id-v2.json: a file system root for the hw2 derivation. */
export interface HardwareTree {
  readonly name: string;
  readonly dirs: readonly string[];
  readonly files: Readonly<Record<string, string>>;
  readonly symlinks: Readonly<Record<string, string>>;
  readonly attributes: readonly string[];
  readonly hardware_id: string | null;
}

export interface HardwareVectors {
  readonly machine_app_id: string;
  readonly machine_app_specific: ReadonlyArray<{ readonly machine_id: string; readonly app_specific_id: string | null }>;
  readonly trees: readonly HardwareTree[];
}

export function hardwareVectors(): HardwareVectors {
  return JSON.parse(readFileSync(new URL('../vectors/hardware-id-v2.json', import.meta.url), 'utf8')) as HardwareVectors;
}

/** Makes the tree under root: directories, files, then symbolic links (as the vectors say). */
export function buildTree(root: string, tree: Pick<HardwareTree, 'dirs' | 'files' | 'symlinks'>): void {
  for (const dir of tree.dirs) mkdirSync(path.join(root, dir), { recursive: true });
  for (const [file, content] of Object.entries(tree.files)) {
    mkdirSync(path.dirname(path.join(root, file)), { recursive: true });
    writeFileSync(path.join(root, file), content);
  }
  for (const [link, target] of Object.entries(tree.symlinks)) {
    mkdirSync(path.dirname(path.join(root, link)), { recursive: true });
    symlinkSync(target, path.join(root, link));
  }
}
