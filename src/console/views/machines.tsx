import { useEffect, useState } from 'preact/hooks';
import { errorText, getJson } from '../api.js';
import { Page } from '../app.js';
import { Time, visible } from '../format.js';
import { Facts, FilterBar, Input, ListTable, Select } from '../parts/list.js';
import { href } from '../router.js';
import { useMay } from '../session.js';
import type { Machine } from '../types.js';
import type { ViewProps } from './index.js';
import { AuditTrail, MachineActions } from './licenses.js';
import { BulkPanel } from './bulk.js';

export const MACHINE_FILTERS = ['license_id', 'holding_seat', 'active', 'hardware_id', 'last_seen_after', 'last_seen_before'] as const;

export function MachinesView({ id, query }: ViewProps) {
  const [version, setVersion] = useState(0);
  const may = useMay();
  if (id) return <MachineDetail id={id} />;
  const filters = Object.fromEntries(MACHINE_FILTERS.map((name) => [name, query.get(name) ?? undefined]));
  const mayChange = may('deactivateMachine') || may('activateMachine');
  return (
    <Page title="Machines" actions={may('bulkLicenses') && <BulkPanel filters={filters} target="machines" onDone={() => setVersion((v) => v + 1)} />}>
      <p class="hint">A machine holds a seat of its license while it is active (floating licenses: while its lease runs) and while an offline file of it is valid.</p>
      <FilterBar view="machines" filters={filters} label="Filter machines">
        <Select name="holding_seat" label="Seat" value={filters.holding_seat} options={[['', 'Any'], ['true', 'Holds a seat'], ['false', 'Holds none']]} />
        <Input name="license_id" label="License id" value={filters.license_id} />
      </FilterBar>
      <ListTable<Machine>
        id="machine-list"
        view="machines"
        api="/api/machines"
        countApi="/api/machines/count"
        filters={filters}
        reload={version}
        columns={[
          { title: 'Hardware ID', cell: (machine) => <a href={href(`machines/${machine.id}`)}>{visible(machine.hardware_id)}</a> },
          { title: 'Name', cell: (machine) => visible(machine.name) || '-' },
          { title: 'License', cell: (machine) => <a href={href(`licenses/${machine.license_id}`)}>{machine.license_id.slice(0, 8)}…</a> },
          { title: 'Seat', cell: (machine) => (machine.holds_seat ? 'holds a seat' : machine.active ? 'no seat' : 'deactivated') },
          { title: 'Last seen', cell: (machine) => <Time iso={machine.last_seen} />, value: true },
          ...(mayChange ? [{ title: 'Actions', cell: (machine: Machine) => <MachineActions machine={machine} onChange={() => setVersion((v) => v + 1)} /> }] : []),
        ]}
        rowKey={(machine) => machine.id}
        rowData={(machine) => ({ 'machine-id': machine.id })}
        caption="Machines, oldest first"
        empty="No machine matches."
        noun="machines"
        csv
      />
    </Page>
  );
}

function MachineDetail({ id }: { id: string }) {
  const [machine, setMachine] = useState<Machine | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    getJson<Machine>(`/api/machines/${encodeURIComponent(id)}`).then(setMachine, (error) => setFailure(errorText(error)));
  }, [id, version]);
  if (failure) return <Page title="Machine"><p class="error" role="alert">{failure}</p></Page>;
  if (!machine) return <Page title="Machine"><p>Loading…</p></Page>;
  return (
    <Page title={`Machine ${visible(machine.hardware_id)}`} actions={<MachineActions machine={machine} onChange={() => setVersion((v) => v + 1)} />}>
      <Facts items={[
        ['License', <a href={href(`licenses/${machine.license_id}`)}>{machine.license_id}</a>],
        ['Hardware ID', visible(machine.hardware_id)],
        ['Name', visible(machine.name) || '-'],
        ['Seat', machine.holds_seat ? 'holds a seat' : machine.active ? 'holds no seat' : 'deactivated'],
        ['Client version', visible(machine.client_version) || '-'],
        ['First seen', <Time iso={machine.first_seen} />],
        ['Last seen', <Time iso={machine.last_seen} />],
        ['Lease ends', <Time iso={machine.lease_expires_at} />],
        ['Offline file until', <Time iso={machine.offline_until} />],
      ]} />
      <AuditTrail entityType="machine" entityId={machine.id} version={version} />
    </Page>
  );
}
