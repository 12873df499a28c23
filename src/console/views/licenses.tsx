import { useEffect, useRef, useState } from 'preact/hooks';
import { call, errorText, getJson, getList, save, send } from '../api.js';
import { Page } from '../app.js';
import { EndDate, lastDayIncluded, Time, visible } from '../format.js';
import { ConfirmButton } from '../parts/confirm.js';
import { Facts, FilterBar, Input, ListTable, Select, type Column } from '../parts/list.js';
import { act, say } from '../parts/status.js';
import { href, navigate } from '../router.js';
import { useMay } from '../session.js';
import type { AuditEntry, License, LicenseView, Machine } from '../types.js';
import type { ViewProps } from './index.js';
import { BulkPanel } from './bulk.js';
import { ImportButton } from '../parts/import.js';
import { Details } from '../parts/details.js';

export const LICENSE_FILTERS = ['status', 'within', 'type', 'customer_id', 'entitlement', 'seats', 'usage', 'expires_after', 'expires_before', 'created_after', 'created_before', 'validated_after', 'validated_before'] as const;

const STATUS_TEXT: Record<string, string> = { active: 'Active', expiring: 'Expiring', expired: 'Expired', suspended: 'Suspended', pending: 'Not started' };

/** The license's state as the server computes it, or from its dates on an older server. */
export function statusOf(license: License): string {
  if (license.status) return license.status;
  if (!license.active || !license.customer_active) return 'suspended';
  const now = Date.now();
  if (Date.parse(license.valid_until) <= now) return 'expired';
  if (Date.parse(license.valid_from) > now) return 'pending';
  return Date.parse(license.valid_until) - now <= 7 * 86_400_000 ? 'expiring' : 'active';
}

export function StatusBadge({ license }: { license: License }) {
  const status = statusOf(license);
  return <span class={`badge ${status}`}>{STATUS_TEXT[status] ?? status}</span>;
}

export function KeyText({ license }: { license: License }) {
  return <span class="key">{license.key ?? `${license.key_prefix}…`}</span>;
}

export function seatsText(license: License): string {
  return `${license.machines_in_use ?? '?'}${license.max_machines === null ? ' (no limit)' : ` of ${license.max_machines}`}${license.floating ? ' (floating)' : ''}`;
}

export const LICENSE_COLUMNS: ReadonlyArray<Column<License>> = [
  { title: 'Key', cell: (license) => <a href={href(`licenses/${license.id}`)}><KeyText license={license} /></a> },
  { title: 'Customer', cell: (license) => <a href={href(`customers/${license.customer_id}`)}>{license.customer_name}</a> },
  { title: 'Type', cell: (license) => license.type },
  { title: 'Status', cell: (license) => <StatusBadge license={license} /> },
  { title: 'Ends (last day)', cell: (license) => <EndDate iso={license.valid_until} />, value: true },
  { title: 'Machines', cell: seatsText, value: true },
];

export function LicensesView({ id, query }: ViewProps) {
  const may = useMay();
  const [version, setVersion] = useState(0);
  if (id === 'new') return <NewLicense query={query} />;
  if (id) return <LicenseDetail id={id} />;
  const filters = Object.fromEntries(LICENSE_FILTERS.map((name) => [name, query.get(name) ?? undefined]));
  return (
    <Page title="Licenses" actions={<>
      {may('bulkLicenses') && <BulkPanel filters={filters} onDone={() => setVersion((v) => v + 1)} />}
      {may('importLicenses') && <ImportButton kind="licenses" onDone={() => setVersion((v) => v + 1)} />}
      {may('newLicense') && <a class="button" href={href('licenses/new', { customer_id: filters.customer_id })}>New license</a>}
    </>}>
      <FilterBar view="licenses" filters={filters} label="Filter licenses">
        <Select name="status" label="Status" value={filters.status} options={[['', 'Any'], ['active', 'Active'], ['expiring', 'Expiring'], ['expired', 'Expired'], ['suspended', 'Suspended'], ['pending', 'Not started']]} />
        <Select name="within" label="Ending within" value={filters.within} options={[['', '-'], ['3d', '3 days'], ['7d', '7 days'], ['30d', '30 days'], ['60d', '60 days'], ['90d', '90 days']]} />
        <Select name="type" label="Type" value={filters.type} options={[['', 'Any'], ['time_based', 'Time based'], ['usage_based', 'Usage based'], ['hybrid', 'Hybrid']]} />
        <Select name="seats" label="Machines" value={filters.seats} options={[['', 'Any'], ['full', 'At or over the limit']]} />
        <Select name="usage" label="Usage" value={filters.usage} options={[['', 'Any'], ['high', '80% of a limit or more']]} />
        <Input name="entitlement" label="Entitlement" value={filters.entitlement} placeholder="code" />
        <Input name="expires_after" label="Ends after" type="date" value={filters.expires_after} />
        <Input name="expires_before" label="Ends before" type="date" value={filters.expires_before} />
        {filters.customer_id && <input type="hidden" name="customer_id" value={filters.customer_id} />}
      </FilterBar>
      <ListTable<License>
        id="license-list"
        view="licenses"
        api="/api/licenses"
        countApi="/api/licenses/count"
        filters={filters}
        columns={LICENSE_COLUMNS}
        rowKey={(license) => license.id}
        rowData={(license) => ({ 'license-id': license.id })}
        caption="Licenses, oldest first"
        empty="No license matches."
        noun="licenses"
        reload={version}
        csv
      />
    </Page>
  );
}

function LicenseDetail({ id }: { id: string }) {
  const may = useMay();
  const [license, setLicense] = useState<LicenseView | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  const reload = () => setVersion((v) => v + 1);
  useEffect(() => {
    getJson<LicenseView>(`/api/licenses/${encodeURIComponent(id)}`).then(setLicense, (error) => setFailure(errorText(error)));
  }, [id, version]);
  if (failure) return <Page title="License"><p class="error" role="alert">{failure}</p></Page>;
  if (!license) return <Page title="License"><p>Loading…</p></Page>;
  return (
    <Page title={`License ${license.key_prefix}…`} actions={<LicenseActions license={license} reload={reload} />}>
      <div class="columns">
        <section aria-labelledby="terms-title">
          <h2 id="terms-title">Terms</h2>
          <Facts
            items={[
              ['Key', <><KeyText license={license} />{license.key && <CopyButton text={license.key} what="key" />}</>],
              ['Customer', <a href={href(`customers/${license.customer_id}`)}>{license.customer_name}</a>],
              ['Status', <StatusBadge license={license} />],
              ['Type', license.type],
              ['Valid from', <Time iso={license.valid_from} />],
              ['Ends (last day included)', <EndDate iso={license.valid_until} />],
              ['Machines', seatsText(license)],
              ['Binding', license.binding],
              ['Decryption key', license.has_decryption_key ? 'yes (offline files need a hardware ID)' : 'no'],
              ...Object.entries(license.metadata).map(([name, value]) => [`Metadata: ${name}`, value] as const),
              ['Created', <Time iso={license.created_at} />],
              ['Changed', <Time iso={license.updated_at} />],
            ]}
          />
        </section>
        <section aria-labelledby="entitlements-title">
          <h2 id="entitlements-title">Entitlements</h2>
          {license.entitlements.length === 0 ? <p>None.</p> : (
            <table>
              <thead><tr><th scope="col">Code</th><th scope="col">Name</th><th scope="col">Used</th></tr></thead>
              <tbody>
                {license.entitlements.map((entitlement) => (
                  <tr key={entitlement.code}>
                    <td>{entitlement.code}</td>
                    <td>{entitlement.name}</td>
                    <td class="value">
                      {entitlement.usage_limit === null ? `${entitlement.used} (no limit)` : (
                        <>
                          <meter min={0} max={entitlement.usage_limit} high={entitlement.usage_limit * 0.8} value={entitlement.used} aria-label={`${entitlement.code} used`} /> {entitlement.used} of {entitlement.usage_limit}
                        </>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </section>
      </div>
      <LicenseMachines license={license} mayChange={may('deactivateMachine')} onChange={reload} version={version} />
      <section aria-labelledby="files-title">
        <h2 id="files-title">Offline files issued</h2>
        {license.recent_checkouts.length === 0 ? <p>None yet.</p> : (
          <div class="scroll">
            <table>
              <thead><tr><th scope="col">Checked out</th><th scope="col">By</th><th scope="col">Hardware ID</th><th scope="col">File valid until</th><th scope="col">Voided</th></tr></thead>
              <tbody>
                {license.recent_checkouts.map((checkout) => (
                  <tr key={checkout.checked_out_at}>
                    <td class="value"><Time iso={checkout.checked_out_at} /></td>
                    <td>{visible(checkout.actor)}</td>
                    <td>{visible(checkout.hardware_id) || '-'}</td>
                    <td class="value"><Time iso={checkout.valid_until} /></td>
                    <td>{checkout.voided ? 'yes' : 'no'}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      <AuditTrail entityType="license" entityId={license.id} version={version} />
    </Page>
  );
}

function LicenseMachines({ license, mayChange, onChange, version }: { license: License; mayChange: boolean; onChange: () => void; version: number }) {
  const [machines, setMachines] = useState<{ items: Machine[]; next: string | null } | null>(null);
  useEffect(() => {
    getList<Machine>(`/api/machines?license_id=${license.id}&limit=100`).then(setMachines, (error) => say(errorText(error), true));
  }, [license.id, version]);
  return (
    <section aria-labelledby="machines-title">
      <h2 id="machines-title">Machines</h2>
      {machines === null ? <p>Loading…</p> : machines.items.length === 0 ? <p>No machine has used this license.</p> : (
        <div class="scroll">
          <table id="license-machines">
            <thead><tr><th scope="col">Hardware ID</th><th scope="col">Name</th><th scope="col">Seat</th><th scope="col">Last seen</th><th scope="col">Offline file until</th>{mayChange && <th scope="col">Actions</th>}</tr></thead>
            <tbody>
              {machines.items.map((machine) => (
                <tr key={machine.id} data-machine-id={machine.id}>
                  <td><a href={href(`machines/${machine.id}`)}>{visible(machine.hardware_id)}</a></td>
                  <td>{visible(machine.name) || '-'}</td>
                  <td>{machine.holds_seat ? 'holds a seat' : machine.active ? 'no seat' : 'deactivated'}</td>
                  <td class="value"><Time iso={machine.last_seen} /></td>
                  <td class="value"><Time iso={machine.offline_until} /></td>
                  {mayChange && <td><MachineActions machine={machine} onChange={onChange} /></td>}
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {machines?.next && <p><a href={href('machines', { license_id: license.id })}>All machines of this license</a></p>}
    </section>
  );
}

/**
 * Deactivate, reactivate, and free the seat: what a support person does for "my machine died".
 * Freeing deactivates the machine and declares its offline files lost; a grace token given to
 * it online cannot be recalled, so its seat may stay taken until that token ends (the server
 * says until when).
 */
export function MachineActions({ machine, onChange }: { machine: Machine; onChange: () => void }) {
  const name = visible(machine.hardware_id);
  const fileValid = machine.offline_until !== null && Date.parse(machine.offline_until) > Date.now();
  const path = `/api/machines/${encodeURIComponent(machine.id)}`;
  const may = useMay();
  return (
    <div class="row-actions">
      {machine.holds_seat && may('freeSeat') && may('releaseSeat') && (
        <ConfirmButton label="Free seat" title={`Free the seat of ${name}?`} doing={`Freeing the seat of ${name}…`} danger onConfirm={async () => {
          const warnings: string[] = [];
          if (machine.active) warnings.push(...(await send<{ warnings: string[] }>('POST', `${path}/deactivate`)).warnings);
          let after = machine;
          if (fileValid) {
            const released = await send<{ machine: Machine; warnings: string[] }>('POST', `${path}/release`, { lost_file: true, reason: 'seat freed in the console' });
            after = released.machine;
            warnings.splice(0, warnings.length, ...released.warnings);
          } else {
            after = await getJson<Machine>(path);
          }
          onChange();
          return after.holds_seat
            ? `Machine ${name} deactivated; ${warnings.map(visible).join(' ')}`
            : `The seat of ${name} is free.`;
        }}>
          <p>The machine is deactivated: it stops validating online.</p>
          {fileValid && <p>Its offline file (valid until {machine.offline_until}) is declared lost: use this only when the file is gone with the machine. A file found again keeps working until it ends.</p>}
          <p>A grace token the machine got online cannot be recalled: until it ends (at most 72 hours after its last validation) the seat stays taken.</p>
        </ConfirmButton>
      )}
      {!(machine.active ? may('deactivateMachine') : may('activateMachine')) ? null : machine.active ? (
        <ConfirmButton label="Deactivate" title={`Deactivate machine ${name}?`} doing={`Deactivating ${name}…`} onConfirm={async () => {
          const change = await send<{ warnings: string[] }>('POST', `${path}/deactivate`);
          onChange();
          return [`Machine ${name} deactivated.`, ...change.warnings.map(visible)].join(' ');
        }}>
          <p>The machine stops validating online. Its seat is freed when no grace token or offline file of it is valid any more.</p>
        </ConfirmButton>
      ) : (
        <button type="button" onClick={(event) => act(event.currentTarget, `Activating ${name}…`, async () => {
          const change = await send<{ warnings: string[] }>('POST', `${path}/activate`);
          onChange();
          return [`Machine ${name} activated.`, ...change.warnings.map(visible)].join(' ');
        })}>Activate</button>
      )}
    </div>
  );
}

function LicenseActions({ license, reload }: { license: LicenseView; reload: () => void }) {
  const edit = useRef<HTMLDialogElement>(null);
  const checkout = useRef<HTMLDialogElement>(null);
  const may = useMay();
  const suspended = !license.active;
  return (
    <>
      {may('extendLicense') && <ExtendButton license={license} onDone={reload} />}
      {may('editLicense') && <button type="button" onClick={() => edit.current?.showModal()}>Edit</button>}
      {may('checkOut') && <button type="button" onClick={() => checkout.current?.showModal()}>Check out .lic</button>}
      {!(suspended ? may('reinstateLicense') : may('suspendLicense')) ? null : suspended ? (
        <button type="button" onClick={(event) => act(event.currentTarget, 'Reinstating…', async () => {
          await send('POST', `/api/licenses/${license.id}/activate`);
          reload();
          return `License ${license.key_prefix} reinstated.`;
        })}>Reinstate</button>
      ) : (
        <ConfirmButton label="Suspend" title={`Suspend license ${license.key_prefix}?`} doing="Suspending…" danger onConfirm={async () => {
          await send('POST', `/api/licenses/${license.id}/deactivate`);
          reload();
          return `License ${license.key_prefix} suspended.`;
        }}>
          <p>Online validations fail from now on. Offline files already issued stay valid until they end.</p>
        </ConfirmButton>
      )}
      {may('editLicense') && <dialog ref={edit} aria-label="Edit license"><EditLicense license={license} close={() => edit.current?.close()} onDone={reload} /></dialog>}
      {may('checkOut') && <dialog ref={checkout} aria-label="Check out an offline license file"><Checkout license={license} close={() => checkout.current?.close()} onDone={reload} /></dialog>}
    </>
  );
}

function ExtendButton({ license, onDone }: { license: License; onDone: () => void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const opener = useRef<HTMLButtonElement>(null);
  const [days, setDays] = useState('30');
  return (
    <>
      <button type="button" ref={opener} class="primary" onClick={() => dialog.current?.showModal()}>Extend</button>
      <dialog ref={dialog} aria-label="Extend the license">
        <form onSubmit={(event) => {
          event.preventDefault();
          dialog.current?.close();
          void act(opener.current, 'Extending…', async () => {
            const renewed = await send<{ license?: License; valid_until?: string }>('POST', `/api/licenses/${license.id}/renew`, { by: `${Number(days)}d` });
            onDone();
            const until = renewed.license?.valid_until ?? renewed.valid_until;
            return `License ${license.key_prefix} extended by ${days} days${until ? `: the last day is now ${lastDayIncluded(until)}` : ''}.`;
          });
        }}>
          <h2>Extend license {license.key_prefix}…</h2>
          <p>It ends after {lastDayIncluded(license.valid_until)} (UTC) today. An expired license is extended from now.</p>
          <label for="extend-days">Days to add</label>
          <input id="extend-days" type="number" min="1" max="36500" required value={days} onInput={(event) => setDays(event.currentTarget.value)} />
          <div class="actions"><button type="submit" class="primary">Extend</button><button type="button" onClick={() => dialog.current?.close()}>Cancel</button></div>
        </form>
      </dialog>
    </>
  );
}

function grantsText(license: License): string {
  return license.entitlements.map((e) => (e.usage_limit === null ? e.code : `${e.code}:${e.usage_limit}`)).join(', ');
}

/** `CODE` or `CODE:LIMIT`, comma separated: the CLI's --entitlement form. */
function parseGrants(text: string): Array<{ code: string; usage_limit: number | null }> {
  return text.split(',').map((part) => part.trim()).filter(Boolean).map((part) => {
    const at = part.lastIndexOf(':');
    if (at === -1) return { code: part, usage_limit: null };
    const limit = part.slice(at + 1).trim();
    return { code: part.slice(0, at).trim(), usage_limit: limit === '' ? null : Number(limit) };
  });
}

function EditLicense({ license, close, onDone }: { license: License; close: () => void; onDone: () => void }) {
  return (
    <form onSubmit={(event) => {
      event.preventDefault();
      const data = new FormData(event.currentTarget);
      const text = (name: string) => String(data.get(name) ?? '').trim();
      const change: Record<string, unknown> = {};
      if (text('valid_until') !== lastDayIncluded(license.valid_until)) change.valid_until = text('valid_until');
      const max = text('max_machines') === '' ? null : Number(text('max_machines'));
      if (max !== license.max_machines) change.max_machines = max;
      const floating = data.get('floating') === 'on';
      if (floating !== license.floating) change.floating = floating;
      if (text('binding') !== license.binding) change.binding = text('binding');
      const before = new Map(license.entitlements.map((e) => [e.code, e.usage_limit]));
      const after = parseGrants(text('entitlements'));
      const added = after.filter((grant) => !before.has(grant.code));
      const removed = [...before.keys()].filter((code) => !after.some((grant) => grant.code === code));
      const limits = after.filter((grant) => before.has(grant.code) && before.get(grant.code) !== grant.usage_limit);
      if (added.length) change.add_entitlements = added;
      if (removed.length) change.remove_entitlements = removed;
      if (limits.length) change.set_limits = limits;
      if (Object.keys(change).length === 0) {
        close();
        say('Nothing changed.');
        return;
      }
      const submit = event.currentTarget.querySelector<HTMLButtonElement>('button[type=submit]');
      void act(submit, 'Saving…', async () => {
        await send('PATCH', `/api/licenses/${license.id}`, change);
        close();
        onDone();
        return `License ${license.key_prefix} saved.`;
      });
    }}>
      <h2>Edit license {license.key_prefix}…</h2>
      <label for="edit-until">Last day included (UTC)</label>
      <input id="edit-until" name="valid_until" type="date" required value={lastDayIncluded(license.valid_until)} />
      <label for="edit-max">Maximum machines (empty: no limit)</label>
      <input id="edit-max" name="max_machines" type="number" min="1" value={license.max_machines ?? ''} />
      <label class="inline"><input name="floating" type="checkbox" checked={license.floating} /> Floating seats (leases)</label>
      <label for="edit-binding">Offline binding</label>
      <select id="edit-binding" name="binding" value={license.binding}><option value="hardware-id">Hardware ID (file format 1)</option><option value="machine-key">Machine key from an activation request (format 2)</option></select>
      <label for="edit-entitlements">Entitlements (CODE or CODE:LIMIT, comma separated)</label>
      <input id="edit-entitlements" name="entitlements" value={grantsText(license)} autoComplete="off" />
      <div class="actions"><button type="submit" class="primary">Save</button><button type="button" onClick={close}>Cancel</button></div>
    </form>
  );
}

/** A .lic file by hardware ID, or answering an activation request file brought from an air-gapped machine. */
function Checkout({ license, close, onDone }: { license: License; close: () => void; onDone: () => void }) {
  const [mode, setMode] = useState<'hardware' | 'request'>('hardware');
  return (
    <form onSubmit={(event) => {
      event.preventDefault();
      const form = event.currentTarget;
      const data = new FormData(form);
      const submit = form.querySelector<HTMLButtonElement>('button[type=submit]');
      void act(submit, 'Checking out…', async () => {
        const body: Record<string, unknown> = { ttl_days: Number(data.get('ttl_days')) };
        if (mode === 'hardware') {
          const hardware = String(data.get('hardware_id') ?? '').trim();
          if (hardware) body.hardware_id = hardware;
        } else {
          const file = data.get('request') as File | null;
          if (!file || file.size === 0) throw new Error('Choose the activation request file.');
          body.request = await file.text();
        }
        const name = await save(await call('POST', `/api/licenses/${license.id}/checkout`, { body, accept: 'application/octet-stream' }), 'license.lic');
        close();
        onDone();
        return `Downloaded ${name}.`;
      });
    }}>
      <h2>Check out license {license.key_prefix}…</h2>
      <fieldset>
        <legend>Bind the file to</legend>
        <label class="inline"><input type="radio" name="mode" checked={mode === 'hardware'} onChange={() => setMode('hardware')} /> A hardware ID</label>
        <label class="inline"><input type="radio" name="mode" checked={mode === 'request'} onChange={() => setMode('request')} /> An activation request file</label>
      </fieldset>
      <label for="checkout-ttl">Days the file is valid (1-365)</label>
      <input id="checkout-ttl" name="ttl_days" type="number" min="1" max="365" required value="30" />
      {mode === 'hardware' ? (
        <>
          <label for="checkout-hardware">Hardware ID{license.has_decryption_key || license.max_machines !== null ? '' : ' (optional)'}</label>
          <input id="checkout-hardware" name="hardware_id" autoComplete="off" required={license.has_decryption_key || license.max_machines !== null} />
        </>
      ) : (
        <>
          <label for="checkout-request">Activation request file</label>
          <input id="checkout-request" name="request" type="file" required />
        </>
      )}
      <div class="actions"><button type="submit" class="primary">Download .lic</button><button type="button" onClick={close}>Cancel</button></div>
    </form>
  );
}

function NewLicense({ query }: { query: URLSearchParams }) {
  const customerId = query.get('customer_id') ?? '';
  const [customerName, setCustomerName] = useState<string | null>(null);
  useEffect(() => {
    if (customerId) getJson<{ name?: string; customer?: { name: string } }>(`/api/customers/${encodeURIComponent(customerId)}`).then((c) => setCustomerName(c.customer?.name ?? c.name ?? null), () => setCustomerName(null));
  }, [customerId]);
  return (
    <Page title="New license">
      <form class="stacked" onSubmit={(event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        const text = (name: string) => String(data.get(name) ?? '').trim();
        const body: Record<string, unknown> = { customer_id: text('customer_id'), type: text('type'), valid_until: text('valid_until') };
        if (text('valid_from')) body.valid_from = text('valid_from');
        if (text('max_machines')) body.max_machines = Number(text('max_machines'));
        if (data.get('floating') === 'on') body.floating = true;
        if (data.get('with_decryption_key') === 'on') body.with_decryption_key = true;
        if (text('binding')) body.binding = text('binding');
        const grants = parseGrants(text('entitlements'));
        if (grants.length) body.entitlements = grants;
        const submit = event.currentTarget.querySelector<HTMLButtonElement>('button[type=submit]');
        void act(submit, 'Creating the license…', async () => {
          const license = await send<License>('POST', '/api/licenses', body);
          navigate(href(`licenses/${license.id}`));
          return `Created license ${license.key ?? license.key_prefix}.`;
        });
      }}>
        <label for="new-customer">Customer id</label>
        <input id="new-customer" name="customer_id" required value={customerId} autoComplete="off" aria-describedby="new-customer-name" />
        <p id="new-customer-name" class="hint">{customerName ? `Customer: ${customerName}` : 'Open a customer and use "New license" there, or paste its id.'}</p>
        <label for="new-type">Type</label>
        <select id="new-type" name="type"><option value="time_based">Time based</option><option value="usage_based">Usage based</option><option value="hybrid">Hybrid</option></select>
        <label for="new-from">Valid from (empty: now)</label>
        <input id="new-from" name="valid_from" type="date" />
        <label for="new-until">Last day included (UTC)</label>
        <input id="new-until" name="valid_until" type="date" required />
        <label for="new-max">Maximum machines (empty: no limit)</label>
        <input id="new-max" name="max_machines" type="number" min="1" />
        <label class="inline"><input name="floating" type="checkbox" /> Floating seats (leases)</label>
        <label class="inline"><input name="with_decryption_key" type="checkbox" /> With a decryption key (offline files need a hardware ID)</label>
        <label for="new-binding">Offline binding</label>
        <select id="new-binding" name="binding"><option value="hardware-id">Hardware ID (file format 1)</option><option value="machine-key">Machine key from an activation request (format 2)</option></select>
        <label for="new-entitlements">Entitlements (CODE or CODE:LIMIT, comma separated)</label>
        <input id="new-entitlements" name="entitlements" autoComplete="off" />
        <div class="actions"><button type="submit" class="primary">Create license</button></div>
      </form>
    </Page>
  );
}

export function CopyButton({ text, what }: { text: string; what: string }) {
  return (
    <button type="button" class="small" onClick={async () => {
      try {
        await navigator.clipboard.writeText(text);
        say(`Copied the ${what}.`);
      } catch {
        say(`The browser did not allow copying: select the ${what} and press Ctrl+C.`, true);
      }
    }}>Copy</button>
  );
}

/** The newest audit entries about one record, with a link to all of them. */
export function AuditTrail({ entityType, entityId, version }: { entityType: string; entityId: string; version: number }) {
  const [entries, setEntries] = useState<{ items: AuditEntry[]; next: string | null } | null>(null);
  useEffect(() => {
    getList<AuditEntry>(`/api/audit?entity_type=${entityType}&entity_id=${entityId}&limit=20`).then(setEntries, (error) => say(errorText(error), true));
  }, [entityType, entityId, version]);
  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit trail</h2>
      {entries === null ? <p>Loading…</p> : entries.items.length === 0 ? <p>No entries.</p> : (
        <div class="scroll">
          <table>
            <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th><th scope="col">Details</th></tr></thead>
            <tbody>
              {entries.items.map((entry) => (
                <tr key={entry.id}>
                  <td class="value"><Time iso={entry.occurred_at} /></td>
                  <td>{visible(entry.actor)}</td>
                  <td>{entry.action}</td>
                  <td class="details"><Details value={entry.details} /></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {entries?.next && <p><a href={href('audit', { entity_type: entityType, entity_id: entityId })}>The whole trail</a></p>}
    </section>
  );
}
