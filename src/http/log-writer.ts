export type LogEntry = Record<string, unknown>;

/**
 * The daemon's log: one JSON object per line, `time` and `level` first (`info` unless the
 * entry says otherwise). Lines are gathered for the rest of the event-loop turn and written
 * in one go: under load a turn ends many requests at once (they share a commit), and each
 * write to stderr, synchronous for files and pipes, is a system call. Nothing waits longer
 * than that turn, and whatever is gathered when the process exits is written then.
 */
export function createLogWriter(write: (text: string) => void = (text) => process.stderr.write(text)): (entry: LogEntry) => void {
  let pending = '';
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (pending === '') return;
    const text = pending;
    pending = '';
    write(text);
  };
  process.once('exit', flush);
  return (entry: LogEntry) => {
    // The request log's entries carry both already: no copy of them per request.
    const record = typeof entry.time === 'string' && typeof entry.level === 'string' ? entry : { time: new Date().toISOString(), level: 'info', ...entry };
    pending += `${JSON.stringify(record)}\n`;
    if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  };
}
