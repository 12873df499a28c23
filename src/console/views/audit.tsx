import { Page } from '../app.js';
import { Time, visible } from '../format.js';
import { Details, RecordLink } from '../parts/details.js';
import { FilterBar, Input, ListTable, Select } from '../parts/list.js';
import { href } from '../router.js';
import type { AuditEntry } from '../types.js';
import type { ViewProps } from './index.js';

export const AUDIT_FILTERS = ['action', 'actor', 'entity_type', 'entity_id', 'since', 'until'] as const;

/** The kinds of record the server audits (appendAudit's entityType across src/lib). */
const ENTITY_TYPES: ReadonlyArray<readonly [string, string]> = [
  ['', 'Any'],
  ['license', 'License'],
  ['customer', 'Customer'],
  ['machine', 'Machine'],
  ['entitlement', 'Entitlement'],
  ['backup', 'Backup'],
  ['signing_key', 'Signing key'],
  ['admin_token', 'Admin token'],
  ['notification_delivery', 'Delivery'],
  ['notifications', 'Notification settings'],
];

/**
 * The audit log, newest first, filtered as GET /api/audit is. The log has no page per entry
 * (the API has no route for one): an entry's record links to that record's page instead.
 */
export function AuditView({ session, id, query }: ViewProps) {
  const filters = Object.fromEntries(AUDIT_FILTERS.map((name) => [name, query.get(name) ?? undefined]));
  return (
    <Page title="Audit log">
      {id && <p class="hint">The audit log has no page per entry; here are all entries, newest first. <a href={href('audit')}>Clear</a></p>}
      <p class="hint">Every change, under the name of the token or the command-line user that made it. Since and Before are UTC days (Before: up to the start of that day).</p>
      <FilterBar view="audit" filters={filters} label="Filter the audit log">
        <Input name="action" label="Action" value={filters.action} placeholder="license.renewed" />
        <Input name="actor" label="Actor" value={filters.actor} placeholder="token:support" />
        <Select name="entity_type" label="Record kind" value={filters.entity_type} options={ENTITY_TYPES} />
        <Input name="entity_id" label="Record id" value={filters.entity_id} />
        <Input name="since" label="Since" type="date" value={filters.since} />
        <Input name="until" label="Before" type="date" value={filters.until} />
      </FilterBar>
      <ListTable<AuditEntry>
        id="audit-list"
        view="audit"
        api="/api/audit"
        filters={filters}
        columns={[
          { title: 'When', cell: (entry) => <Time iso={entry.occurred_at} />, value: true },
          { title: 'Who', cell: (entry) => <a href={href('audit', { actor: entry.actor })} title="Everything this actor did">{visible(entry.actor)}</a> },
          { title: 'What', cell: (entry) => <a href={href('audit', { action: entry.action })} title="Every entry of this action">{entry.action}</a>, value: true },
          { title: 'Record', cell: (entry) => <RecordLink entityType={entry.entity_type} entityId={entry.entity_id} session={session} /> },
          { title: 'Details', cell: (entry) => <Details value={entry.details} /> },
        ]}
        rowKey={(entry) => String(entry.id)}
        rowData={(entry) => ({ 'audit-id': String(entry.id) })}
        caption="Audit entries, newest first"
        empty="No audit entry matches."
        noun="entries"
      />
    </Page>
  );
}
