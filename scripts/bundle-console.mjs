// Bundles the console (src/console/main.tsx, Preact) into src/http/admin/admin.js, a
// generated file (git-ignored) that the build copies to dist/ with the page's HTML and CSS
// and that tests running from src/ serve as it is. esbuild: one dependency-free binary
// that bundles TSX in well under a second, where a bundler with plugins would add dozens of
// packages to the install.
import { build } from 'esbuild';
import { fileURLToPath } from 'node:url';

export async function bundleConsole() {
  await build({
    entryPoints: [fileURLToPath(new URL('../src/console/main.tsx', import.meta.url))],
    outfile: fileURLToPath(new URL('../src/http/admin/admin.js', import.meta.url)),
    bundle: true,
    format: 'esm',
    // Chromium, Firefox and Safari of the last few years; no polyfills.
    target: ['es2022'],
    minify: true,
    legalComments: 'eof',
    jsx: 'automatic',
    jsxImportSource: 'preact',
    logLevel: 'warning',
  });
}

if (import.meta.url === `file://${process.argv[1]}`) await bundleConsole();
