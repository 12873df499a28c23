import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getList, send } from '../api.js';
import { Page } from '../app.js';
import { Time } from '../format.js';
import { Failure } from '../parts/details.js';
import { Facts, Input, ListTable } from '../parts/list.js';
import { act } from '../parts/status.js';
import { href } from '../router.js';
import { useMay } from '../session.js';
import type { Entitlement } from '../types.js';
import type { ViewProps } from './index.js';
import { AuditTrail } from './licenses.js';

/** Entitlements (licensed features), by code; licenses grant them, with or without a usage limit. */
export function EntitlementsView({ session, id }: ViewProps) {
  const [version, setVersion] = useState(0);
  const dialog = useRef<HTMLDialogElement>(null);
  if (id) return <EntitlementDetail id={id} />;
  const mayCreate = useMay()('newEntitlement');
  return (
    <Page title="Entitlements" actions={mayCreate && <button type="button" class="primary" onClick={() => dialog.current?.showModal()}>New entitlement</button>}>
      <p class="hint">A feature a license can grant, named by its code. A license's page shows each grant's usage against its limit.</p>
      <ListTable<Entitlement>
        id="entitlement-list"
        view="entitlements"
        api="/api/entitlements"
        filters={{}}
        reload={version}
        columns={[
          { title: 'Code', cell: (entitlement) => <a href={href(`entitlements/${entitlement.id}`)} class="key">{entitlement.code}</a> },
          { title: 'Name', cell: (entitlement) => entitlement.name },
          { title: 'Licenses', cell: (entitlement) => <a href={href('licenses', { entitlement: entitlement.code })}>Licenses granting it</a> },
          { title: 'Created', cell: (entitlement) => <Time iso={entitlement.created_at} />, value: true },
        ]}
        rowKey={(entitlement) => entitlement.id}
        rowData={(entitlement) => ({ 'entitlement-id': entitlement.id })}
        caption="Entitlements by code"
        empty="No entitlements yet."
        noun="entitlements"
      />
      {mayCreate && (
        <dialog ref={dialog} aria-label="New entitlement">
          <NewEntitlement close={() => dialog.current?.close()} onDone={() => setVersion((v) => v + 1)} />
        </dialog>
      )}
    </Page>
  );
}

function NewEntitlement({ close, onDone }: { close: () => void; onDone: () => void }) {
  const [failure, setFailure] = useState<string | null>(null);
  return (
    <form
      class="stacked"
      onSubmit={(event) => {
        event.preventDefault();
        const form = event.currentTarget;
        const data = new FormData(form);
        const code = String(data.get('code') ?? '').trim();
        const name = String(data.get('name') ?? '').trim();
        setFailure(null);
        void act(form.querySelector<HTMLButtonElement>('button[type=submit]'), `Creating entitlement ${code}…`, async () => {
          try {
            const created = await send<Entitlement>('POST', '/api/entitlements', { code, name });
            form.reset();
            close();
            onDone();
            return `Created entitlement ${created.code}.`;
          } catch (error) {
            // Said in the dialog, where the person is looking, as well as on the status line.
            setFailure(errorText(error));
            throw error;
          }
        });
      }}
    >
      <h2>New entitlement</h2>
      <Input name="code" label="Code (letters, digits, _ . and -; used in license files and by clients)" value={undefined} placeholder="PRO" required />
      <Input name="name" label="Name" value={undefined} placeholder="Professional features" required />
      {failure && <p class="error" role="alert">{failure}</p>}
      <div class="actions">
        <button type="submit" class="primary">Create entitlement</button>
        <button type="button" onClick={close}>Cancel</button>
      </div>
    </form>
  );
}

/**
 * The API has no route for one entitlement; entitlements are few, so the page reads the list
 * (by pages, as the API gives it) until it finds this one.
 */
function EntitlementDetail({ id }: { id: string }) {
  const [entitlement, setEntitlement] = useState<Entitlement | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  useEffect(() => {
    const abort = new AbortController();
    (async () => {
      try {
        for (let path: string | null = '/api/entitlements?limit=1000'; path !== null;) {
          const page: { items: Entitlement[]; next: string | null } = await getList<Entitlement>(path, abort.signal);
          const found = page.items.find((item) => item.id === id);
          if (found) return setEntitlement(found);
          path = page.next;
        }
        setFailure('No entitlement has this id.');
      } catch (error) {
        if (!abort.signal.aborted) setFailure(errorText(error));
      }
    })();
    return () => abort.abort();
  }, [id]);
  if (failure) return <Page title="Entitlement"><Failure text={failure} /></Page>;
  if (!entitlement) return <Page title="Entitlement"><p>Loading…</p></Page>;
  return (
    <Page title={`Entitlement ${entitlement.code}`}>
      <Facts items={[
        ['Code', <span class="key">{entitlement.code}</span>],
        ['Name', entitlement.name],
        ['Licenses', <a href={href('licenses', { entitlement: entitlement.code })}>Licenses granting {entitlement.code}</a>],
        ['Id', entitlement.id],
        ['Created', <Time iso={entitlement.created_at} />],
      ]} />
      <AuditTrail entityType="entitlement" entityId={entitlement.id} version={0} />
    </Page>
  );
}
