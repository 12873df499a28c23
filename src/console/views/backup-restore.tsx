import { useEffect, useRef, useState } from 'preact/hooks';
import { call, errorText, send } from '../api.js';
import { visible } from '../format.js';
import { say } from '../parts/status.js';
import { allows, type Session } from '../session.js';

interface SigningKeyChanges {
  readonly another_server: boolean;
  readonly changes: ReadonlyArray<{ key_id: string; before: string | null; backup: string | null; after: string | null }>;
}

interface RestoreReport {
  readonly backup_id: string;
  readonly pre_restore_backup_id: string | null;
  readonly revocations: {
    readonly keep: boolean;
    readonly admin_tokens: ReadonlyArray<{ name: string }>;
    readonly licenses: ReadonlyArray<{ key_prefix: string }>;
    readonly customers: ReadonlyArray<{ name: string }>;
    readonly machines?: ReadonlyArray<{ hardware_id: string }>;
  };
  readonly signing_keys: SigningKeyChanges | null;
  readonly moved: { readonly from: string; readonly to: string; readonly rows: Record<string, number> } | null;
}

export interface Restoring {
  readonly id: string;
  readonly target?: string;
}

/** The signing keys a restore changes (or would), as the CLI words them. */
export function describeSigningKeys(keys: SigningKeyChanges | null | undefined, mood: 'would' | 'did'): string {
  if (!keys) return '';
  const foreign = keys.another_server
    ? `This backup is another server's (it shares no signing key with this one): its signing keys and admin tokens ${mood === 'would' ? 'would replace' : 'replaced'} this server's. `
    : '';
  const changes = keys.changes.map((k) => `key ${k.key_id}: ${k.after ?? 'removed from the key set'} (before: ${k.before ?? 'not in the store'}; in the backup: ${k.backup ?? 'not in it'})`);
  return `${foreign}${changes.length ? `Signing keys${mood === 'would' ? ' that would change' : ' changed'}: ${changes.join('; ')}.` : ''}`;
}

const ENGINES: Record<string, string> = { sqlite: 'SQLite', postgres: 'PostgreSQL' };

/** What a restore did, in the words the command line uses. */
export function restoredText(report: RestoreReport): string {
  const { admin_tokens: tokens, licenses, customers, machines = [], keep } = report.revocations;
  const carried = [
    tokens.length ? ` Kept revoked: ${tokens.map((t) => `token ${visible(t.name)}`).join(', ')}.` : '',
    licenses.length + customers.length + machines.length
      ? ` ${keep ? 'Kept deactivated' : 'Active again, as in the backup'}: ${[...licenses.map((l) => `license ${l.key_prefix}`), ...customers.map((c) => `customer ${visible(c.name)}`), ...machines.map((m) => `machine ${visible(m.hardware_id)}`)].join(', ')}.`
      : '',
  ].join('');
  const moved = report.moved
    ? ` Moved from ${ENGINES[report.moved.from] ?? report.moved.from} to ${ENGINES[report.moved.to] ?? report.moved.to}: ${Object.values(report.moved.rows).reduce((sum, n) => sum + n, 0)} rows.`
    : '';
  const keys = describeSigningKeys(report.signing_keys, 'did');
  return `Restored backup ${report.backup_id}; the previous state is backup ${report.pre_restore_backup_id ?? 'none'}.${moved}${carried}${keys ? ` ${keys}` : ''}`;
}

/**
 * The restore's confirmation: the backup id typed, after a dry run says what the restore would
 * do to the signing keys (or why it would fail). Another server's keys and tokens replace this
 * one's only when the box, off by default and admin's alone, is ticked: the id typed never covers
 * them. The dialog stays open on a refusal, with the reason, so the person can answer it.
 */
export function RestoreDialog({ restoring, session, onClose, onRestored }: { restoring: Restoring; session: Session; onClose: () => void; onRestored: () => void }) {
  const { id, target } = restoring;
  const dialog = useRef<HTMLDialogElement>(null);
  const confirm = useRef<HTMLInputElement>(null);
  const [preview, setPreview] = useState('Checking the backup…');
  const [foreign, setForeign] = useState(false);
  const [said, setSaid] = useState<{ text: string; error: boolean } | null>(null);
  const [busy, setBusy] = useState(false);
  useEffect(() => {
    dialog.current?.showModal();
    confirm.current?.focus();
    const abort = new AbortController();
    call('POST', `/api/backups/${encodeURIComponent(id)}/restore`, { body: { dry_run: true, ...(target ? { target } : {}) }, signal: abort.signal })
      .then((response) => response.json() as Promise<{ signing_keys: SigningKeyChanges | null }>)
      .then((answer) => {
        const keys = describeSigningKeys(answer.signing_keys, 'would');
        setPreview(keys || (answer.signing_keys
          ? 'The checks pass; this server\'s signing keys would stay as they are.'
          : 'The checks pass. This backup does not list its signing keys (an earlier release made it): the report after the restore says what changed.'));
        setForeign(answer.signing_keys?.another_server === true);
      })
      .catch((error) => {
        if (!abort.signal.aborted) setPreview(`The restore would fail: ${errorText(error)}`);
      });
    return () => abort.abort();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="restore-title" onClose={onClose}>
      <form
        id="restore-form"
        onSubmit={async (event) => {
          event.preventDefault();
          const data = new FormData(event.currentTarget);
          const typed = String(data.get('confirm') ?? '').trim();
          if (typed !== id) {
            setSaid({ text: 'The id typed does not match the backup to restore.', error: true });
            return;
          }
          setBusy(true);
          setSaid({ text: `Restoring ${id}… the server pauses for a moment.`, error: false });
          try {
            const body = {
              confirm: typed,
              keep_revocations: data.get('keep') === 'on',
              ...(data.get('replace_keys') === 'on' ? { replace_keys: true } : {}),
              ...(target ? { target } : {}),
            };
            const report = await send<RestoreReport>('POST', `/api/backups/${encodeURIComponent(id)}/restore`, body);
            dialog.current?.close();
            say(restoredText(report));
            onRestored();
          } catch (error) {
            setSaid({ text: errorText(error), error: true });
          } finally {
            setBusy(false);
          }
        }}
      >
        <h2 id="restore-title">Restore {id}{target ? ` from target ${target}` : ''}</h2>
        <p>This replaces all current data. A pre-restore backup is taken first.</p>
        <p id="restore-preview">{preview}</p>
        <label for="restore-confirm">Type the backup id to confirm</label>
        <input id="restore-confirm" ref={confirm} name="confirm" class="key" autoComplete="off" spellcheck={false} required />
        <label class="inline"><input type="checkbox" name="keep" defaultChecked /> Keep licenses and customers deactivated since the backup deactivated (revoked API tokens always stay revoked)</label>
        {foreign && (
          <label class="inline"><input type="checkbox" name="replace_keys" disabled={!allows(session, 'admin')} /> Let the backup's signing keys and tokens replace this server's (it is another server's backup; only the admin scope may)</label>
        )}
        {said && <p class={said.error ? 'error' : undefined} role={said.error ? 'alert' : 'status'}>{said.text}</p>}
        <div class="actions">
          <button type="submit" class="danger" disabled={busy} aria-busy={busy ? 'true' : undefined}>Restore</button>
          <button type="button" disabled={busy} onClick={() => dialog.current?.close()}>Cancel</button>
        </div>
      </form>
    </dialog>
  );
}
