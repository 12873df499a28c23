import { useEffect, useState } from 'preact/hooks';
import { call, errorText, getJson, save, send } from '../api.js';
import { Page } from '../app.js';
import { age, size, Time, visible } from '../format.js';
import { Failure } from '../parts/details.js';
import { Facts, ListTable, type Column } from '../parts/list.js';
import { act } from '../parts/status.js';
import { href } from '../router.js';
import { allows, useMay, type Session } from '../session.js';
import type { ActionName } from '../actions.js';
import type { ViewProps } from './index.js';
import { RestoreDialog, type Restoring } from './backup-restore.js';

/** A complete, verified backup as GET /api/backups lists it (here or on a target). */
interface Backup {
  readonly backup_id: string;
  readonly created_at: string;
  readonly trigger: string;
  readonly engine: string;
  readonly schema_version: number;
  readonly encrypted: boolean;
  readonly file: string;
  readonly size: number;
}

interface Scheduler {
  readonly enabled: boolean;
  readonly schedule: string;
  readonly next_run: string | null;
  readonly last_run: { readonly slot: string; readonly status: string; readonly error?: string | null } | null;
}

interface BackupList {
  readonly backups: Backup[];
  readonly scheduler?: Scheduler;
  readonly warnings?: ReadonlyArray<{ readonly message: string }>;
}

/** GET /api/backups/status: local storage and each off-site target. */
interface Place {
  readonly place: string;
  readonly kind: 'local' | 'file' | 's3' | 'sftp';
  readonly location: string;
  readonly newest_backup_id: string | null;
  readonly age_seconds: number | null;
  readonly count: number;
  readonly bytes: number;
  readonly unreachable: string | null;
  readonly last_error: string | null;
  readonly copies: { readonly pending: number; readonly copying: number; readonly stuck: number } | null;
}

/** GET /api/backups/status's `replication`: serve's Litestream and each replica's lag. */
interface Replication {
  readonly state: string;
  readonly litestream_version: string;
  readonly restarts: number;
  readonly replicas: ReadonlyArray<{
    readonly target: string;
    readonly position: string | null;
    readonly lag_seconds: number | null;
    readonly caught_up_at: string | null;
    readonly errors: number;
    readonly last_error: { readonly at: string; readonly message: string } | null;
  }>;
}

/** GET /api/backups/status's `drill`: the newest restore drill. */
interface Drill {
  readonly finished_at: string;
  readonly trigger: string;
  readonly ok: boolean;
  readonly parts: ReadonlyArray<{ readonly source: string; readonly name: string; readonly ok: boolean; readonly state_at: string | null; readonly error: { readonly code: string; readonly message: string } | null }>;
}

interface BackupStatus {
  readonly places: Place[];
  readonly replication: Replication | null;
  readonly drill: Drill | null;
}

/**
 * Backups here and on each off-site target: create, download, validate, restore (the id typed
 * to confirm, after a dry run says what the restore would do to the signing keys). A target's
 * list has its own URL (?target=NAME), the way back for a host that lost its own backups.
 */
export function BackupsView({ session, query }: ViewProps) {
  const target = query.get('target') ?? undefined;
  const [version, setVersion] = useState(0);
  const [listed, setListed] = useState<BackupList | null>(null);
  const may = useMay();
  const [restoring, setRestoring] = useState<Restoring | null>(null);
  const reload = () => setVersion((v) => v + 1);
  useEffect(() => {
    if (!target) return;
    // A target's list carries no scheduler or local debris: the first local page does.
    const abort = new AbortController();
    getJson<BackupList>('/api/backups?limit=1', abort.signal).then(setListed, () => undefined);
    return () => abort.abort();
  }, [target, version]);
  return (
    <Page
      title="Backups"
      actions={may('createBackup') &&
        <button type="button" class="primary" onClick={(event) => act(event.currentTarget, 'Creating a backup… (this can take a while for a large database)', async () => {
          const backup = await send<Backup & { copies?: string; warning?: string }>('POST', '/api/backups');
          reload();
          const copies = backup.copies === 'pending' ? ' It is being copied to the off-site targets.' : '';
          return `Created backup ${backup.backup_id}.${copies}${backup.warning ? ` Warning: ${backup.warning}` : ''}`;
        })}>Create backup</button>
      }
    >
      {listed?.scheduler && <SchedulerFacts scheduler={listed.scheduler} />}
      {listed?.warnings && listed.warnings.length > 0 && (
        <ul class="warnings" aria-label="Left in the backup directory">
          {listed.warnings.map((warning) => <li key={warning.message}>{visible(warning.message)}</li>)}
        </ul>
      )}
      <Places current={target ?? 'local'} version={version} />
      <h2 id="backups-title">{target ? `Backups on target ${target}` : 'Backups in local storage'}</h2>
      {target && <p><a href={href('backups')}>Back to this server's backups</a></p>}
      <ListTable<Backup>
        key={target ?? 'local'}
        id={target ? 'target-backup-list' : 'backup-list'}
        view="backups"
        api="/api/backups"
        filters={{ target }}
        reload={version}
        itemsOf={(json) => {
          const answer = json as BackupList;
          if (!target) setListed(answer);
          return answer.backups;
        }}
        columns={backupColumns(session, may, target, setRestoring, reload)}
        rowKey={(backup) => backup.backup_id}
        rowData={(backup) => ({ 'backup-id': backup.backup_id })}
        caption={target ? `Complete backups on the off-site target ${target}, newest first` : 'Complete, verified backups, newest first'}
        empty={target ? 'No backups on this target.' : 'No backups yet.'}
        noun="backups"
      />
      {restoring && (
        <RestoreDialog
          key={`${restoring.target ?? ''}/${restoring.id}`}
          restoring={restoring}
          session={session}
          onClose={() => setRestoring(null)}
          onRestored={reload}
        />
      )}
    </Page>
  );
}

function SchedulerFacts({ scheduler }: { scheduler: Scheduler }) {
  const last = scheduler.last_run;
  return (
    <Facts items={[
      ['Automatic backups', scheduler.enabled ? `on (${scheduler.schedule})` : 'off'],
      ...(scheduler.enabled
        ? [
            ['Next run', <Time iso={scheduler.next_run} />] as const,
            ['Last run', last ? <><Time iso={last.slot} />: {last.status}{last.error ? ` (${visible(last.error)})` : ''}</> : 'none yet'] as const,
          ]
        : []),
    ]} />
  );
}

function backupColumns(session: Session, may: (action: ActionName) => boolean, target: string | undefined, restore: (what: Restoring) => void, reload: () => void): ReadonlyArray<Column<Backup>> {
  const columns: Array<Column<Backup>> = [
    { title: 'ID', cell: (backup) => <span class="key">{backup.backup_id}</span>, value: true },
    { title: 'Created', cell: (backup) => <Time iso={backup.created_at} />, value: true },
    { title: 'Size', cell: (backup) => size(backup.size), value: true },
    { title: 'Engine (schema)', cell: (backup) => `${backup.engine} (${backup.schema_version})`, value: true },
  ];
  columns.push({ title: 'Encrypted', cell: (backup) => (backup.encrypted ? 'yes' : 'no') });
  if (!target) columns.push({ title: 'Trigger', cell: (backup) => backup.trigger });
  columns.push({
    title: 'Actions',
    cell: (backup) => (
      <div class="row-actions">
        {!target && may('downloadBackup') && <DownloadButton backup={backup} session={session} />}
        {may('validateBackup') && <button type="button" onClick={(event) => act(event.currentTarget, `Validating ${backup.backup_id}${target ? ` on ${target}` : ''}…`, async () => {
          const report = await send<{ backup_id: string; checks: ReadonlyArray<{ check: string; detail: string }> }>('POST', `/api/backups/${encodeURIComponent(backup.backup_id)}/validate`, target ? { target } : undefined);
          if (target) reload();
          return `Backup ${report.backup_id} is valid: ${report.checks.map((check) => `${check.check}: ${check.detail}`).join('; ')}.`;
        })}>Validate</button>}
        {may('restoreBackup') && (
          <button type="button" onClick={() => restore({ id: backup.backup_id, ...(target ? { target } : {}) })}>{target ? 'Restore from target…' : 'Restore…'}</button>
        )}
      </div>
    ),
  });
  return columns;
}

/**
 * An unencrypted archive is the whole database in the clear, so only an admin token may
 * download it (the server refuses others with BACKUP_UNENCRYPTED); the button says so.
 */
function DownloadButton({ backup, session }: { backup: Backup; session: Session }) {
  return (
    <button
      type="button"
      disabled={!backup.encrypted && !allows(session, 'admin')}
      title={backup.encrypted ? undefined : 'Not encrypted: this archive holds the private signing key (unless sealed), every license key and every license\'s decryption key in the clear, so only an admin token may download it. Set backup.encryption_key to encrypt backups.'}
      onClick={(event) => act(event.currentTarget, `Downloading ${backup.backup_id}…`, async () => {
        await save(await call('GET', `/api/backups/${encodeURIComponent(backup.backup_id)}/download`), backup.file);
        return `Downloaded ${backup.file}.`;
      })}
    >
      {backup.encrypted ? 'Download' : 'Download (admin only)'}
    </button>
  );
}

/** Local storage and each off-site target: the newest good backup there, read from the place itself. */
function Places({ current, version }: { current: string; version: number }) {
  const [status, setStatus] = useState<BackupStatus | null>(null);
  const places = status?.places ?? null;
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    getJson<BackupStatus>('/api/backups/status', abort.signal).then(
      (answer) => {
        setStatus(answer);
        setFailure(null);
      },
      (error) => {
        if (!abort.signal.aborted) setFailure(errorText(error));
      },
    );
    return () => abort.abort();
  }, [version]);
  return (
    <section aria-labelledby="places-title">
      <h2 id="places-title">Storage and off-site targets</h2>
      {failure && <Failure text={failure} />}
      <div class="scroll">
        <table id="place-table" aria-labelledby="places-title">
          <thead>
            <tr><th scope="col">Place</th><th scope="col">Where</th><th scope="col">Newest</th><th scope="col">Age</th><th scope="col">Count</th><th scope="col">Size</th><th scope="col">Copies waiting</th><th scope="col">Last error</th><th scope="col">Backups</th></tr>
          </thead>
          <tbody aria-busy={places === null && failure === null ? 'true' : 'false'}>
            {places?.map((place) => (
              <tr key={place.place} data-place={place.place}>
                <td>{visible(place.place)}</td>
                <td class="location">{visible(place.location)}</td>
                <td class="key value">{place.newest_backup_id ?? (place.unreachable ? 'cannot be read' : 'none')}</td>
                <td class="value">{place.age_seconds === null ? '-' : age(place.age_seconds)}</td>
                <td class="value">{place.count}</td>
                <td class="value">{size(place.bytes)}</td>
                <td>{backlogText(place)}</td>
                <td>{visible(place.unreachable ?? place.last_error ?? '') || '-'}</td>
                <td class="value">
                  <a
                    href={href('backups', { target: place.kind === 'local' ? undefined : place.place })}
                    aria-current={current === place.place ? 'page' : undefined}
                    aria-label={`Show backups on ${place.place}`}
                  >
                    Show backups
                  </a>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {status?.replication && <ReplicationTable replication={status.replication} />}
      {status && <DrillFacts drill={status.drill} />}
    </section>
  );
}

/** Each replica's lag behind the database, as serve tracks it from Litestream. */
function ReplicationTable({ replication }: { replication: Replication }) {
  const restarts = replication.restarts > 0 ? `, restarted ${replication.restarts} time${replication.restarts === 1 ? '' : 's'}` : '';
  return (
    <>
      <h3 id="replication-title">Continuous replication</h3>
      <p>Litestream {visible(replication.litestream_version)}: {replication.state}{restarts}.</p>
      <div class="scroll">
        <table id="replica-table" aria-labelledby="replication-title">
          <thead>
            <tr><th scope="col">Target</th><th scope="col">Lag</th><th scope="col">Caught up</th><th scope="col">Errors</th><th scope="col">Last error</th></tr>
          </thead>
          <tbody>
            {replication.replicas.map((replica) => (
              <tr key={replica.target} data-replica={replica.target}>
                <td>{visible(replica.target)}</td>
                <td class="value">{replica.lag_seconds === null ? 'unknown' : `${replica.lag_seconds} s`}</td>
                <td>{replica.caught_up_at ? <Time iso={replica.caught_up_at} /> : '-'}</td>
                <td class="value">{replica.errors}</td>
                <td>{replica.last_error ? <><Time iso={replica.last_error.at} />: {visible(replica.last_error.message)}</> : '-'}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}

/** The newest restore drill: whether the backups and replicas were last proven to restore. */
function DrillFacts({ drill }: { drill: Drill | null }) {
  const failed = drill?.parts.find((part) => !part.ok);
  return (
    <Facts items={[
      ['Last restore drill', drill
        ? <span data-drill={drill.ok ? 'passed' : 'failed'}>{drill.ok ? 'passed' : 'failed'}, <Time iso={drill.finished_at} /> ({drill.trigger}){failed?.error ? `: ${failed.source} ${visible(failed.name)}: ${visible(failed.error.message)}` : ''}</span>
        : 'none yet'],
    ]} />
  );
}

function backlogText(place: Place): string {
  if (place.kind === 'local' || place.copies === null) return '-';
  const { pending, copying, stuck } = place.copies;
  if (pending === 0) return 'none';
  const parts = [copying ? `${copying} copying` : '', stuck ? `${stuck} stuck` : ''].filter(Boolean);
  return `${pending}${parts.length ? ` (${parts.join(', ')})` : ''}`;
}
