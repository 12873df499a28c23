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
// The AWS SDK (the S3 backup target) warns on stderr, in several lines, that its releases
// from 2027 need Node 22; that would break a command's one summary line on Node 20.
// package-lock.json pins the SDK release we tested. Set here, in the program, never in src/lib.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
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
