import { useEffect, useRef, useState } from 'preact/hooks';
import { ApiError, errorText, getJson, send } from '../api.js';
import { Page } from '../app.js';
import { Time, visible } from '../format.js';
import { ConfirmButton } from '../parts/confirm.js';
import { Failure } from '../parts/details.js';
import { Facts, FilterBar, ListTable, Select } from '../parts/list.js';
import { act, say } from '../parts/status.js';
import { href } from '../router.js';
import { useMay, type Scope, type Session } from '../session.js';
import type { ViewProps } from './index.js';
import { AuditTrail } from './licenses.js';

/** An AdminToken as GET /api/tokens gives it (docs/http-api.md, "Admin tokens"): never its secret. */
interface AdminToken {
  readonly id: string;
  readonly name: string;
  readonly scopes: readonly Scope[];
  readonly expires_at: string | null;
  readonly prefix: string;
  readonly created_by: string;
  readonly created_at: string;
  readonly last_used_at: string | null;
  readonly revoked_at: string | null;
  readonly warnings?: readonly string[];
}

const SCOPES: ReadonlyArray<readonly [Scope, string]> = [
  ['read', 'read: see every record, license keys cut short'],
  ['licenses', 'licenses: create and change customers, licenses, machines; see whole keys'],
  ['backups', 'backups: create, list, validate and download backups'],
  ['restore', 'restore: restore a backup (replaces every record)'],
  ['metrics', 'metrics: GET /metrics only, for Prometheus'],
  ['admin', 'admin: everything, tokens and notifications included'],
];

const EXPIRIES: ReadonlyArray<readonly [string, string]> = [['', 'Never'], ['24h', '1 day'], ['7d', '7 days'], ['30d', '30 days'], ['90d', '90 days'], ['1y', '1 year']];

/** The message for a server without the token routes (an older release): the command line still makes tokens. */
const NO_TOKEN_API = 'This server has no token API (GET /api/tokens answers "no such route"): it is an older release. Make and revoke tokens on the command line: license-server token create, license-server token revoke.';

function NoTokenApi() {
  return (
    <p class="error" role="alert">
      This server has no token API (<code>GET /api/tokens</code> answers "no such route"): it is an older release. Make and revoke tokens on the
      command line: <code>license-server token create</code>, <code>license-server token revoke</code>.
    </p>
  );
}

function isMissingRoute(error: unknown): boolean {
  return error instanceof ApiError && error.code === 'ROUTE_NOT_FOUND';
}

function stateOf(token: AdminToken): string {
  if (token.revoked_at) return 'revoked';
  if (token.expires_at && Date.parse(token.expires_at) <= Date.now()) return 'expired';
  return 'live';
}

/** The signed-in token itself: the API revokes it only when asked twice (allow_self). */
function isSelf(token: AdminToken, session: Session): boolean {
  return session.actor === `token:${token.name}`;
}

/**
 * Admin tokens: every route needs admin (a token that makes tokens can make itself any), so the
 * page is admin's. The secret of a new token is shown once, in a dialog, and then dropped.
 */
export function TokensView({ session, id, query }: ViewProps) {
  const [version, setVersion] = useState(0);
  const may = useMay();
  const [missing, setMissing] = useState<boolean | null>(null);
  const [issued, setIssued] = useState<(AdminToken & { token: string }) | null>(null);
  const create = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const abort = new AbortController();
    getJson<unknown>('/api/tokens?limit=1', abort.signal).then(
      () => setMissing(false),
      (error) => {
        if (!abort.signal.aborted) setMissing(isMissingRoute(error));
      },
    );
    return () => abort.abort();
  }, []);
  if (missing) return <Page title="Tokens"><NoTokenApi /></Page>;
  if (id) return <TokenDetail id={id} session={session} />;
  const filters = { include_revoked: query.get('include_revoked') ?? undefined };
  const reload = () => setVersion((v) => v + 1);
  return (
    <Page title="Tokens" actions={may('newToken') && <button type="button" class="primary" onClick={() => create.current?.showModal()}>New token</button>}>
      <p class="hint">Admin API tokens, oldest first. Each acts under its own name in the audit log. The token this server was configured with (<code>admin_token</code>) is not stored and not listed.</p>
      <FilterBar view="tokens" filters={filters} label="Filter tokens">
        <Select name="include_revoked" label="Show" value={filters.include_revoked} options={[['', 'Live and expired'], ['true', 'Revoked too']]} />
      </FilterBar>
      <ListTable<AdminToken>
        id="token-list"
        view="tokens"
        api="/api/tokens"
        filters={filters}
        reload={version}
        columns={[
          { title: 'Name', cell: (token) => <TokenName token={token} /> },
          { title: 'Prefix', cell: (token) => <span class="key">{token.prefix}…</span>, value: true },
          { title: 'Scopes', cell: (token) => token.scopes.join(', ') },
          { title: 'State', cell: (token) => <span class={`badge token-${stateOf(token)}`}>{stateOf(token)}</span> },
          { title: 'Expires', cell: (token) => <Time iso={token.expires_at} empty="never" />, value: true },
          { title: 'Last used', cell: (token) => <Time iso={token.last_used_at} empty="never" />, value: true },
          { title: 'Actions', cell: (token) => (token.revoked_at || !may('revokeToken') ? '' : <RevokeButton token={token} session={session} onDone={reload} />) },
        ]}
        rowKey={(token) => token.id}
        rowData={(token) => ({ 'token-id': token.id })}
        caption="Admin tokens, oldest first"
        empty="No stored tokens."
        noun="tokens"
      />
      <dialog ref={create} aria-label="New token">
        <NewToken close={() => create.current?.close()} onIssued={(token) => {
          setIssued(token);
          reload();
        }} />
      </dialog>
      {issued && <SecretDialog issued={issued} onClose={() => setIssued(null)} />}
    </Page>
  );
}

function TokenName({ token }: { token: AdminToken }) {
  return (
    <>
      <a href={href(`tokens/${token.id}`)}>{visible(token.name)}</a>
      {token.warnings?.map((warning) => <p key={warning} class="hint warn">{visible(warning)}</p>)}
    </>
  );
}

function NewToken({ close, onIssued }: { close: () => void; onIssued: (token: AdminToken & { token: string }) => void }) {
  const [failure, setFailure] = useState<string | null>(null);
  return (
    <form
      class="stacked"
      onSubmit={(event) => {
        event.preventDefault();
        const form = event.currentTarget;
        const data = new FormData(form);
        const name = String(data.get('name') ?? '').trim();
        const scopes = data.getAll('scopes').map(String);
        const expires = String(data.get('expires_in') ?? '');
        if (scopes.length === 0) {
          setFailure('Choose at least one scope.');
          return;
        }
        setFailure(null);
        void act(form.querySelector<HTMLButtonElement>('button[type=submit]'), `Creating token ${name}…`, async () => {
          try {
            const issued = await send<AdminToken & { token: string }>('POST', '/api/tokens', { name, scopes, ...(expires ? { expires_in: expires } : {}) });
            form.reset();
            close();
            onIssued(issued);
            return `Created token ${visible(issued.name)}: copy its secret now.`;
          } catch (error) {
            // Said in the dialog, where the person is looking, as well as on the status line.
            setFailure(isMissingRoute(error) ? NO_TOKEN_API : errorText(error));
            throw error;
          }
        });
      }}
    >
      <h2>New token</h2>
      <label for="token-name">Name (unique, never reused; the audit log records it)</label>
      <input id="token-name" name="name" required maxLength={100} autoComplete="off" placeholder="support-desk" />
      <fieldset>
        <legend>Scopes</legend>
        {SCOPES.map(([scope, text]) => (
          <label key={scope} class="inline"><input type="checkbox" name="scopes" value={scope} defaultChecked={scope === 'read'} /> {text}</label>
        ))}
      </fieldset>
      <label for="token-expires">Expires after</label>
      <select id="token-expires" name="expires_in">
        {EXPIRIES.map(([value, text]) => <option key={value} value={value}>{text}</option>)}
      </select>
      {failure && <p class="error" role="alert">{failure}</p>}
      <div class="actions">
        <button type="submit" class="primary">Create token</button>
        <button type="button" onClick={close}>Cancel</button>
      </div>
    </form>
  );
}

/**
 * The one time the secret is seen: the server keeps only its hash. Closing the dialog drops it
 * from the page, so nothing of it stays in the DOM.
 */
function SecretDialog({ issued, onClose }: { issued: AdminToken & { token: string }; onClose: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const field = useRef<HTMLInputElement>(null);
  useEffect(() => {
    dialog.current?.showModal();
    field.current?.select();
  }, []);
  return (
    <dialog ref={dialog} aria-labelledby="secret-title" onClose={onClose}>
      <h2 id="secret-title">Token {visible(issued.name)} created</h2>
      <p><strong>Copy the token now: you will not see it again.</strong> The server keeps only its hash; if it is lost, revoke it and make another.</p>
      <label for="token-secret">Token ({issued.scopes.join(', ')}{issued.expires_at ? `, expires ${issued.expires_at.slice(0, 10)}` : ', never expires'})</label>
      <input id="token-secret" ref={field} class="key" readOnly value={issued.token} autoComplete="off" spellcheck={false} />
      <div class="actions">
        <button type="button" class="primary" onClick={async () => {
          try {
            await navigator.clipboard.writeText(issued.token);
            say('Token copied.');
          } catch {
            field.current?.select();
            say('Selected: press Ctrl+C (or Cmd+C) to copy.');
          }
        }}>Copy token</button>
        <button type="button" onClick={() => dialog.current?.close()}>Done</button>
      </div>
    </dialog>
  );
}

function RevokeButton({ token, session, onDone }: { token: AdminToken; session: Session; onDone: () => void }) {
  const self = isSelf(token, session);
  const name = visible(token.name);
  return (
    <ConfirmButton label="Revoke" title={`Revoke token ${name}?`} doing={`Revoking ${name}…`} danger onConfirm={async () => {
      await send('POST', `/api/tokens/${encodeURIComponent(token.id)}/revoke`, self ? { allow_self: true } : {});
      onDone();
      return `Token ${name} revoked.`;
    }}>
      <p>Anything using it stops working at once, on every daemon of this database. A revoked token cannot be restored; its name cannot be used again.</p>
      {self && <p class="error"><strong>This is the token you are signed in with:</strong> revoking it signs you out.</p>}
    </ConfirmButton>
  );
}

function TokenDetail({ id, session }: { id: string; session: Session }) {
  const may = useMay();
  const [token, setToken] = useState<AdminToken | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const abort = new AbortController();
    getJson<AdminToken>(`/api/tokens/${encodeURIComponent(id)}`, abort.signal).then(setToken, (error) => {
      if (!abort.signal.aborted) setFailure(isMissingRoute(error) ? NO_TOKEN_API : errorText(error));
    });
    return () => abort.abort();
  }, [id, version]);
  if (failure) return <Page title="Token"><Failure text={failure} /></Page>;
  if (!token) return <Page title="Token"><p>Loading…</p></Page>;
  const name = visible(token.name);
  return (
    <Page title={`Token ${name}`} actions={!token.revoked_at && may('revokeToken') && <RevokeButton token={token} session={session} onDone={() => setVersion((v) => v + 1)} />}>
      <Facts items={[
        ['Name', name],
        ['Prefix', <span class="key">{token.prefix}…</span>],
        ['Scopes', token.scopes.join(', ')],
        ['State', stateOf(token)],
        ['Expires', <Time iso={token.expires_at} empty="never" />],
        ['Last used', <Time iso={token.last_used_at} empty="never" />],
        ['Created', <Time iso={token.created_at} />],
        ['Created by', <a href={href('audit', { actor: token.created_by })}>{visible(token.created_by)}</a>],
        ['Revoked', <Time iso={token.revoked_at} empty="no" />],
        ['What it did', <a href={href('audit', { actor: `token:${token.name}` })}>Audit entries under token:{name}</a>],
        ['Id', token.id],
        ...(token.warnings?.length ? [['Warnings', token.warnings.map(visible).join(' ')] as const] : []),
      ]} />
      <AuditTrail entityType="admin_token" entityId={token.id} version={version} />
    </Page>
  );
}
