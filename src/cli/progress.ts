/**
 * A listr2 task with byte progress when a person watches a terminal; nothing at all
 * otherwise (cron jobs get the one summary line the command prints at the end).
 */
export interface ProgressReporter {
  phase(title: string, totalBytes?: number): void;
  bytes(count: number): void;
}

/**
 * Narrower than this, listr2 wraps its one line into a column of characters (a terminal that
 * reports 0 columns, as a serial console or a pseudo-terminal nobody sized does, gets one
 * character per line): no spinner then, as off a terminal.
 */
const MIN_COLUMNS = 20;

export async function withProgress<T>(interactive: boolean, title: string, work: (progress: ProgressReporter) => Promise<T>): Promise<T> {
  // listr2 draws on standard output, at its width.
  const drawable = Boolean(process.stdout.isTTY) && (process.stdout.columns ?? 0) >= MIN_COLUMNS;
  if (!interactive || !drawable) return work({ phase: () => undefined, bytes: () => undefined });
  const { Listr } = await import('listr2');
  let result: T | undefined;
  await new Listr(
    [
      {
        title,
        task: async (_context, task) => {
          let phase = title;
          let total = 0;
          let done = 0;
          let shown = 0;
          const render = () => {
            task.title = total > 0 ? `${phase}: ${formatBytes(done)} of ${formatBytes(total)} (${Math.min(100, Math.floor((done / total) * 100))}%)` : phase;
          };
          result = await work({
            phase(next, totalBytes) {
              phase = next;
              total = totalBytes ?? 0;
              done = 0;
              render();
            },
            bytes(count) {
              done += count;
              // Redraw at most every 1% (or MiB) rather than on every chunk.
              if (done - shown >= Math.max(1024 * 1024, total / 100)) {
                shown = done;
                render();
              }
            },
          });
          task.title = title;
        },
      },
    ],
    { rendererOptions: { collapseErrors: false }, exitOnError: true },
  ).run();
  return result as T;
}

export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(value < 10 ? 1 : 0)} ${units[unit]}`;
}
