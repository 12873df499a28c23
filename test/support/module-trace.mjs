// Loaded with --import (through NODE_OPTIONS) into a program under test: when the program
// exits, MODULE_TRACE_FILE lists every module it loaded, one per line: the path of each
// CommonJS file, each Node built-in as `node:<name>` and, with MODULE_TRACE_ESM=1, the URL of
// each ES module. Listing ES modules takes a loader hook, which runs on a worker thread: that
// run's built-ins include worker_threads and what it loads, whatever the program does.
import { writeFileSync } from 'node:fs';
import { createRequire, register } from 'node:module';

const urls = [];
if (process.env.MODULE_TRACE_ESM === '1') {
  const esm = new MessageChannel();
  esm.port1.on('message', (url) => urls.push(url));
  esm.port1.unref();
  register(
    `data:text/javascript,${encodeURIComponent(`
      let port;
      export function initialize(data) { port = data.port; }
      export async function load(url, context, next) { port.postMessage(url); return next(url, context); }
    `)}`,
    { data: { port: esm.port2 }, transferList: [esm.port2] },
  );
}

process.on('exit', () => {
  const builtins = process.moduleLoadList.filter((entry) => entry.startsWith('NativeModule ')).map((entry) => `node:${entry.slice('NativeModule '.length)}`);
  const commonJs = Object.keys(createRequire(import.meta.url).cache);
  writeFileSync(process.env.MODULE_TRACE_FILE, [...urls, ...commonJs, ...builtins].join('\n'));
});
