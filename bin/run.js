#!/usr/bin/env node
// Start-up time is spent loading modules (bench/startup.mjs), so this file does what it can
// before oclif loads:
// - `--version` alone is answered here, in oclif's own format, without loading oclif at all;
// - on Node 22.1+, V8's compile cache is kept in the user's cache directory (never a shared
//   temporary one), which makes every later start skip compiling the same modules again.
import { readFileSync } from 'node:fs';
import module from 'node:module';
import { homedir } from 'node:os';
import path from 'node:path';

const argv = process.argv.slice(2);
if (argv.length === 1 && argv[0] === '--version') {
  const { name, version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
  process.stdout.write(`${name}/${version} ${process.platform}-${process.arch} node-${process.version}\n`);
} else {
  if (typeof module.enableCompileCache === 'function' && !process.env.NODE_COMPILE_CACHE) {
    try {
      const base = process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache');
      module.enableCompileCache(path.join(base, 'license-server', 'node-compile-cache'));
    } catch {
      // No cache is only slower, never wrong.
    }
  }
  // The execute entry point alone, not the @oclif/core barrel: ~10 ms less on every start.
  const { execute } = await import('@oclif/core/execute');
  await execute({ dir: import.meta.url });
}
