import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson, send } from '../api.js';
import { act, say } from '../parts/status.js';

interface BulkPreview {
  readonly count: number;
}

interface BulkJob {
  readonly id: string;
  readonly state: 'queued' | 'running' | 'done' | 'failed' | 'cancelled';
  readonly total: number;
  readonly done: number;
  readonly changed: number;
  readonly unchanged: number;
  readonly failed: number;
  readonly error: string | null;
  readonly errors: ReadonlyArray<{ id: string; code: string; message: string }>;
}

const ACTIONS = {
  licenses: [['extend', 'Extend by'], ['suspend', 'Suspend'], ['reinstate', 'Reinstate']],
  machines: [['deactivate', 'Deactivate'], ['reactivate', 'Reactivate']],
} as const;

const FINISHED = new Set(['done', 'failed', 'cancelled']);

/**
 * One action over every license (or machine) the filters select, as a server-side job: the count first
 * (what the job would touch), then the job, whose progress is shown until it ends. Each license
 * gets the audit entry and event a single action writes.
 */
export function BulkPanel({ filters, target = 'licenses', onDone }: { filters: Record<string, string | undefined>; target?: 'licenses' | 'machines'; onDone?: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [action, setAction] = useState<string>(ACTIONS[target][0][0]);
  const [days, setDays] = useState('30');
  const [preview, setPreview] = useState<BulkPreview | null>(null);
  const [job, setJob] = useState<BulkJob | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const filter = Object.fromEntries(Object.entries(filters).filter((entry): entry is [string, string] => entry[1] !== undefined && entry[1] !== ''));
  const body = () => ({ target, action, ...(action === 'extend' ? { by: `${Number(days)}d` } : {}), filter });
  const describe = Object.entries(filter).map(([name, value]) => `${name}=${value}`).join(', ') || `every ${target.slice(0, -1)}`;

  // Follows the job until it ends: its progress is the server's, read once a second.
  useEffect(() => {
    if (!job || FINISHED.has(job.state)) return;
    const timer = setTimeout(() => {
      getJson<BulkJob>(`/api/bulk/${job.id}`).then((next) => {
        setJob(next);
        if (FINISHED.has(next.state)) {
          say(`Bulk job ${next.state}: ${next.changed} changed, ${next.unchanged} unchanged, ${next.failed} refused.`, next.state !== 'done' || next.failed > 0);
          onDone?.();
        }
      }, (error) => setFailure(errorText(error)));
    }, 1000);
    return () => clearTimeout(timer);
  }, [job]);

  const open = () => {
    setPreview(null);
    setJob(null);
    setFailure(null);
    dialog.current?.showModal();
  };
  return (
    <div class="bulk">
      <button type="button" onClick={open}>Bulk action…</button>
      <dialog ref={dialog} aria-label="Bulk action">
        <h2>Bulk action on {target}</h2>
        <p>On every {target.slice(0, -1)} of this filter: {describe}.</p>
        <label for="bulk-action">Action</label>
        <select id="bulk-action" value={action} onChange={(event) => { setAction(event.currentTarget.value); setPreview(null); }}>
          {ACTIONS[target].map(([value, text]) => <option key={value} value={value}>{text}</option>)}
        </select>
        {action === 'extend' && (
          <>
            <label for="bulk-days">Days to add</label>
            <input id="bulk-days" type="number" min="1" max="36500" value={days} onInput={(event) => { setDays(event.currentTarget.value); setPreview(null); }} />
          </>
        )}
        {failure && <p class="error" role="alert">{failure}</p>}
        <div role="status" aria-live="polite">
          {preview && !job && <p>This would {action === 'extend' ? `extend by ${days} days` : action} {preview.count.toLocaleString()} {target}.</p>}
          {job && (
            <>
              <p>Job {job.state}: {job.done.toLocaleString()} of {job.total.toLocaleString()} done ({job.changed} changed, {job.unchanged} unchanged, {job.failed} refused).</p>
              <progress max={Math.max(job.total, 1)} value={job.done} aria-label="Progress of the bulk job" />
              {job.error && <p class="error">{job.error}</p>}
              {job.errors.length > 0 && <ul>{job.errors.slice(0, 10).map((row) => <li key={row.id}>{row.id}: {row.message} ({row.code})</li>)}</ul>}
            </>
          )}
        </div>
        <div class="actions">
          {!job && (
            <button type="button" onClick={(event) => act(event.currentTarget, 'Counting…', async () => {
              setFailure(null);
              try {
                setPreview(await send<BulkPreview>('POST', '/api/bulk', { ...body(), dry_run: true }));
              } catch (error) {
                setFailure(errorText(error));
              }
            })}>Preview</button>
          )}
          {!job && (
            <button type="button" class="primary" disabled={preview === null || preview.count === 0} onClick={(event) => act(event.currentTarget, 'Starting the job…', async () => {
              try {
                setJob(await send<BulkJob>('POST', '/api/bulk', body()));
              } catch (error) {
                setFailure(errorText(error));
              }
            })}>{preview ? `Run on ${preview.count.toLocaleString()} ${target}` : 'Run'}</button>
          )}
          {job && !FINISHED.has(job.state) && (
            <button type="button" class="danger" onClick={(event) => act(event.currentTarget, 'Cancelling…', async () => {
              setJob(await send<BulkJob>('POST', `/api/bulk/${job.id}/cancel`));
            })}>Cancel job</button>
          )}
          <button type="button" onClick={() => dialog.current?.close()}>Close</button>
        </div>
      </dialog>
    </div>
  );
}
