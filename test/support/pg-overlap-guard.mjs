// Preloaded into every Node process the tests start (the CLI, `serve`, helpers), through the
// NODE_OPTIONS that test/support/pg-overlap.ts sets in the test process. pg warns, once per
// process, when a statement is sent to a connection still running another ("Calling
// client.query() when the client is already executing a query is deprecated"); pg 9 throws
// instead. Here that warning ends the process at once, exit 70, with the marker and the stack
// of the call on stderr, so that a child that overlaps statements fails its test (runCli and
// startServe also look for the marker) rather than printing a line nobody reads.
// Plain JavaScript: the children run the built CLI without tsx.
const MARKER = 'license-server test guard: overlapping pg statements';
const OVERLAP = /already executing a query/;

process.on('warning', (warning) => {
  if (warning.name !== 'DeprecationWarning' || !OVERLAP.test(warning.message)) return;
  process.stderr.write(`${MARKER}: ${warning.stack ?? warning.message}\n`);
  process.exit(70);
});
