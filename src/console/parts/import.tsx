import { useRef, useState } from 'preact/hooks';
import { call, errorText } from '../api.js';
import { act } from './status.js';

/** POST /api/{customers,licenses}/import's answer (docs/http-api.md, "CSV export and import"). */
interface ImportReport {
  readonly rows: number;
  readonly valid: boolean;
  readonly imported: number;
  readonly errors: ReadonlyArray<{ line: number; column: string | null; code: string; message: string }>;
}

/**
 * Import from a CSV file in two steps: a dry run that reports every row's errors by line,
 * and the import itself, offered only when the dry run found none (the server writes nothing
 * unless every row is valid anyway).
 */
export function ImportButton({ kind, onDone }: { kind: 'customers' | 'licenses'; onDone: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [file, setFile] = useState<File | null>(null);
  const [report, setReport] = useState<ImportReport | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const send = async (dryRun: boolean) => {
    const response = await call('POST', `/api/${kind}/import${dryRun ? '?dry_run=true' : ''}`, { raw: { bytes: await file!.arrayBuffer(), type: 'text/csv' } });
    return (await response.json()) as ImportReport;
  };
  const reset = () => {
    setFile(null);
    setReport(null);
    setFailure(null);
  };
  return (
    <>
      <button type="button" onClick={() => { reset(); dialog.current?.showModal(); }}>Import CSV…</button>
      <dialog ref={dialog} aria-label={`Import ${kind} from CSV`}>
        <h2>Import {kind} from CSV</h2>
        <p class="hint">The columns are the export's; the first row names them. Nothing is written unless every row is valid.</p>
        <label for={`import-${kind}`}>CSV file</label>
        <input id={`import-${kind}`} type="file" accept=".csv,text/csv" onChange={(event) => { setFile(event.currentTarget.files?.[0] ?? null); setReport(null); setFailure(null); }} />
        {failure && <p class="error" role="alert">{failure}</p>}
        {report && (
          <div role="status">
            <p>{report.valid ? `${report.rows} rows, all valid.` : `${report.errors.length} problem${report.errors.length === 1 ? '' : 's'} in ${report.rows} rows: nothing can be imported until they are fixed.`}</p>
            {report.errors.length > 0 && (
              <div class="scroll">
                <table aria-label="Problems by line">
                  <thead><tr><th scope="col">Line</th><th scope="col">Column</th><th scope="col">Problem</th></tr></thead>
                  <tbody>
                    {report.errors.map((error) => (
                      <tr key={`${error.line}-${error.column}-${error.code}`}><td class="value">{error.line}</td><td>{error.column ?? '-'}</td><td>{error.message} ({error.code})</td></tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </div>
        )}
        <div class="actions">
          <button type="button" disabled={file === null} onClick={(event) => act(event.currentTarget, 'Checking the file…', async () => {
            try {
              setReport(await send(true));
              setFailure(null);
            } catch (error) {
              setReport(null);
              setFailure(errorText(error));
            }
          })}>Check file</button>
          <button type="button" class="primary" disabled={!report?.valid || report.rows === 0} onClick={(event) => act(event.currentTarget, `Importing ${kind}…`, async () => {
            const done = await send(false);
            dialog.current?.close();
            onDone();
            return `Imported ${done.imported} ${kind}.`;
          })}>Import {report?.valid ? `${report.rows} ${kind}` : ''}</button>
          <button type="button" onClick={() => dialog.current?.close()}>Close</button>
        </div>
      </dialog>
    </>
  );
}
