import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson, send } from '../api.js';
import { Page } from '../app.js';
import { Time } from '../format.js';
import { ConfirmButton } from '../parts/confirm.js';
import { Facts, FilterBar, Input, ListTable, Select } from '../parts/list.js';
import { act } from '../parts/status.js';
import { href, navigate } from '../router.js';
import { useMay } from '../session.js';
import type { Customer } from '../types.js';
import type { ViewProps } from './index.js';
import { ImportButton } from '../parts/import.js';
import { AuditTrail, LICENSE_COLUMNS } from './licenses.js';
import type { License } from '../types.js';

export function CustomersView({ id, query }: ViewProps) {
  const may = useMay();
  const [version, setVersion] = useState(0);
  if (id === 'new') return <CustomerForm />;
  if (id) return <CustomerDetail id={id} />;
  const filters = { active: query.get('active') ?? undefined };
  return (
    <Page title="Customers" actions={<>
      {may('importCustomers') && <ImportButton kind="customers" onDone={() => setVersion((v) => v + 1)} />}
      {may('newCustomer') && <a class="button" href={href('customers/new')}>New customer</a>}
    </>}>
      <FilterBar view="customers" filters={filters} label="Filter customers">
        <Select name="active" label="State" value={filters.active} options={[['', 'Any'], ['true', 'Active'], ['false', 'Deactivated']]} />
      </FilterBar>
      <ListTable<Customer>
        id="customer-list"
        view="customers"
        api="/api/customers"
        filters={filters}
        columns={[
          { title: 'Name', cell: (customer) => <a href={href(`customers/${customer.id}`)}>{customer.name}</a> },
          { title: 'Email', cell: (customer) => customer.email ?? '-' },
          { title: 'State', cell: (customer) => (customer.active ? 'active' : 'deactivated') },
          { title: 'Created', cell: (customer) => <Time iso={customer.created_at} />, value: true },
        ]}
        rowKey={(customer) => customer.id}
        rowData={(customer) => ({ 'customer-id': customer.id })}
        caption="Customers, oldest first"
        empty="No customer matches."
        noun="customers"
        reload={version}
        csv
      />
    </Page>
  );
}

/** GET /api/customers/:id answers the customer with a summary of its licenses. */
type CustomerSummary = Customer & { customer?: Customer };

function CustomerDetail({ id }: { id: string }) {
  const may = useMay();
  const [customer, setCustomer] = useState<Customer | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const edit = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    getJson<CustomerSummary>(`/api/customers/${encodeURIComponent(id)}`).then((answer) => setCustomer(answer.customer ?? answer), (error) => setFailure(errorText(error)));
  }, [id, version]);
  if (failure) return <Page title="Customer"><p class="error" role="alert">{failure}</p></Page>;
  if (!customer) return <Page title="Customer"><p>Loading…</p></Page>;
  const reload = () => setVersion((v) => v + 1);
  return (
    <Page
      title={customer.name}
      actions={(
        <>
          {may('newLicense') && <a class="button primary" href={href('licenses/new', { customer_id: customer.id })}>New license</a>}
          {may('editCustomer') && <button type="button" onClick={() => edit.current?.showModal()}>Edit</button>}
          {!(customer.active ? may('deactivateCustomer') : may('activateCustomer')) ? null : customer.active ? (
            <ConfirmButton label="Deactivate" title={`Deactivate ${customer.name}?`} doing="Deactivating…" danger onConfirm={async () => {
              await send('POST', `/api/customers/${customer.id}/deactivate`);
              reload();
              return `Customer ${customer.name} deactivated.`;
            }}><p>Every license of this customer stops validating online until the customer is activated again.</p></ConfirmButton>
          ) : (
            <button type="button" onClick={(event) => act(event.currentTarget, 'Activating…', async () => {
              await send('POST', `/api/customers/${customer.id}/activate`);
              reload();
              return `Customer ${customer.name} activated.`;
            })}>Activate</button>
          )}
        </>
      )}
    >
      <Facts items={[['Email', customer.email ?? '-'], ['State', customer.active ? 'active' : 'deactivated'], ['Id', customer.id], ['Created', <Time iso={customer.created_at} />], ['Changed', <Time iso={customer.updated_at} />]]} />
      <dialog ref={edit} aria-label="Edit customer">
        <CustomerFields customer={customer} close={() => edit.current?.close()} onDone={reload} />
      </dialog>
      <h2>Licenses</h2>
      <ListTable<License>
        id="customer-licenses"
        view={`customers/${customer.id}`}
        api="/api/licenses"
        filters={{ customer_id: customer.id }}
        columns={LICENSE_COLUMNS}
        rowKey={(license) => license.id}
        rowData={(license) => ({ 'license-id': license.id })}
        caption={`Licenses of ${customer.name}`}
        empty="No licenses yet."
        noun="licenses"
        reload={version}
      />
      <AuditTrail entityType="customer" entityId={customer.id} version={version} />
    </Page>
  );
}

function CustomerFields({ customer, close, onDone }: { customer?: Customer; close?: () => void; onDone?: () => void }) {
  return (
    <form class="stacked" onSubmit={(event) => {
      event.preventDefault();
      const data = new FormData(event.currentTarget);
      const name = String(data.get('name') ?? '').trim();
      const email = String(data.get('email') ?? '').trim();
      const submit = event.currentTarget.querySelector<HTMLButtonElement>('button[type=submit]');
      void act(submit, customer ? 'Saving…' : 'Creating the customer…', async () => {
        if (customer) {
          await send('PATCH', `/api/customers/${customer.id}`, { name, email: email || null });
          close?.();
          onDone?.();
          return `Customer ${name} saved.`;
        }
        const created = await send<Customer>('POST', '/api/customers', { name, ...(email ? { email } : {}) });
        navigate(href(`customers/${created.id}`));
        return `Created customer ${created.name}.`;
      });
    }}>
      {customer && <h2>Edit {customer.name}</h2>}
      <Input name="name" label="Name" value={customer?.name} required />
      <Input name="email" label="Email (for expiry reminders)" type="email" value={customer?.email ?? undefined} />
      <div class="actions">
        <button type="submit" class="primary">{customer ? 'Save' : 'Create customer'}</button>
        {close && <button type="button" onClick={close}>Cancel</button>}
      </div>
    </form>
  );
}

function CustomerForm() {
  return <Page title="New customer"><CustomerFields /></Page>;
}
