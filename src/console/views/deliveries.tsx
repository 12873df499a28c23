import { useEffect, useState } from 'preact/hooks';
import { errorText, getJson, send } from '../api.js';
import { Page } from '../app.js';
import { Time, visible } from '../format.js';
import { Details, Failure } from '../parts/details.js';
import { Facts, FilterBar, ListTable, Select } from '../parts/list.js';
import { act } from '../parts/status.js';
import { href } from '../router.js';
import { useMay, type Session } from '../session.js';
import type { Delivery } from '../types.js';
import type { ViewProps } from './index.js';
import { AuditTrail } from './licenses.js';

/** GET /api/notifications/deliveries/:id: the list's row with the event's data. */
interface DeliveryRecord extends Delivery {
  readonly event_id: string;
  readonly last_attempt_at: string | null;
  readonly delivered_at: string | null;
  readonly occurred_at: string;
  readonly data: Record<string, unknown>;
}

/** The events the server sends (EVENTS in src/lib/notifications/events.ts, docs/notifications.md). */
const EVENTS = [
  'backup.succeeded', 'backup.failed', 'backup.restored', 'backup.copy_failed', 'backup.stale',
  'license.checked_out', 'license.created', 'license.updated', 'license.renewed', 'license.deactivated', 'license.expired', 'license.expiring_soon',
  'machine.activated', 'machine.migrated', 'machine.limit_exceeded', 'usage.threshold', 'signing_key.rotated',
];

const STATUS_TEXT: Record<string, string> = { pending: 'pending', failed: 'failed', delivered: 'delivered' };

export function lastOutcome(delivery: Delivery): string {
  if (delivery.last_error !== null) return visible(delivery.last_error);
  return delivery.last_status !== null ? `HTTP ${delivery.last_status}` : '-';
}

/**
 * The outbox: one row per webhook or email an event was sent to, newest first. "Pending" holds
 * both the new and the retrying (a webhook answering 500 stays pending until its retries run
 * out), so a dead URL shows here long before it turns "failed".
 */
export function DeliveriesView({ session, id, query }: ViewProps) {
  const [version, setVersion] = useState(0);
  const may = useMay();
  if (id) return <DeliveryDetail id={id} session={session} />;
  const filters = { status: query.get('status') ?? undefined, event: query.get('event') ?? undefined };
  const reload = () => setVersion((v) => v + 1);
  return (
    <Page title="Deliveries">
      <p class="hint">One row per webhook or email an event was sent to, newest first. Pending: not sent yet, or retrying after a failed attempt (see Last outcome). Failed: given up on; Redeliver sends it again under the same id, to the webhook as it is configured now.</p>
      <FilterBar view="deliveries" filters={filters} label="Filter deliveries">
        <Select name="status" label="Status" value={filters.status} options={[['', 'Any'], ['pending', 'Pending or retrying'], ['failed', 'Failed (given up)'], ['delivered', 'Delivered']]} />
        <Select name="event" label="Event" value={filters.event} options={[['', 'Any'], ...EVENTS.map((event) => [event, event] as const)]} />
      </FilterBar>
      <ListTable<Delivery>
        id="delivery-list"
        view="deliveries"
        api="/api/notifications/deliveries"
        filters={filters}
        reload={version}
        columns={[
          { title: 'Event', cell: (delivery) => <a href={href(`deliveries/${delivery.id}`)} title={`Delivery ${delivery.id}`}>{delivery.event}</a>, value: true },
          { title: 'Target', cell: (delivery) => `${delivery.channel} ${visible(delivery.target)}` },
          { title: 'Status', cell: (delivery) => <DeliveryStatus delivery={delivery} /> },
          { title: 'Attempts', cell: (delivery) => String(delivery.attempts), value: true },
          { title: 'Last outcome', cell: lastOutcome },
          { title: 'Created', cell: (delivery) => <Time iso={delivery.created_at} />, value: true },
          ...(may('redeliver') ? [{ title: 'Actions', cell: (delivery: Delivery) => <RedeliverButton delivery={delivery} onDone={reload} /> }] : []),
        ]}
        rowKey={(delivery) => delivery.id}
        rowData={(delivery) => ({ 'delivery-id': delivery.id })}
        caption="Notification deliveries, newest first"
        empty={filters.status === 'failed' ? 'No failed deliveries.' : filters.status || filters.event ? 'No delivery matches.' : 'No deliveries yet.'}
        noun="deliveries"
      />
    </Page>
  );
}

/** Pending ones say when the next attempt is due: a webhook retrying against a dead URL shows here. */
function DeliveryStatus({ delivery }: { delivery: Delivery }) {
  return (
    <>
      <span class={`badge delivery-${delivery.status}`}>{STATUS_TEXT[delivery.status] ?? delivery.status}</span>
      {delivery.status === 'pending' && delivery.next_attempt_at && <span class="next-attempt">next <Time iso={delivery.next_attempt_at} /></span>}
    </>
  );
}

/** A redelivery sends an event's data out again: notifications are the admin scope's. */
function RedeliverButton({ delivery, onDone }: { delivery: Delivery; onDone: () => void }) {
  return (
    <div class="row-actions"><button type="button" onClick={(event) => act(event.currentTarget, `Redelivering ${delivery.id}…`, async () => {
      const again = await send<Delivery>('POST', `/api/notifications/deliveries/${encodeURIComponent(delivery.id)}/redeliver`);
      onDone();
      return `Delivery ${again.id} is ${again.status} again: the server sends it to ${again.channel} ${visible(again.target)} within a few seconds.`;
    })}>Redeliver</button></div>
  );
}

function DeliveryDetail({ id, session }: { id: string; session: Session }) {
  const may = useMay();
  const [delivery, setDelivery] = useState<DeliveryRecord | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [version, setVersion] = useState(0);
  useEffect(() => {
    const abort = new AbortController();
    getJson<DeliveryRecord>(`/api/notifications/deliveries/${encodeURIComponent(id)}`, abort.signal).then(setDelivery, (error) => {
      if (!abort.signal.aborted) setFailure(errorText(error));
    });
    return () => abort.abort();
  }, [id, version]);
  if (failure) return <Page title="Delivery"><Failure text={failure} /></Page>;
  if (!delivery) return <Page title="Delivery"><p>Loading…</p></Page>;
  return (
    <Page
      title={`Delivery of ${delivery.event}`}
      actions={may('redeliver') && <RedeliverButton delivery={delivery} onDone={() => setVersion((v) => v + 1)} />}
    >
      <div class="columns">
        <section aria-labelledby="delivery-facts-title">
          <h2 id="delivery-facts-title">Delivery</h2>
          <Facts items={[
            ['Id', <span class="key">{delivery.id}</span>],
            ['Event', <a href={href('deliveries', { event: delivery.event })} title="Every delivery of this event">{delivery.event}</a>],
            ['Target', `${delivery.channel} ${visible(delivery.target)}`],
            ['Status', <span class={`badge delivery-${delivery.status}`}>{STATUS_TEXT[delivery.status] ?? delivery.status}</span>],
            ['Attempts', String(delivery.attempts)],
            ['Last attempt', <Time iso={delivery.last_attempt_at} />],
            ['Last outcome', lastOutcome(delivery)],
            ['Next attempt', delivery.status === 'pending' ? <Time iso={delivery.next_attempt_at} /> : '-'],
            ['Delivered', <Time iso={delivery.delivered_at} />],
            ['Event occurred', <Time iso={delivery.occurred_at} />],
            ['Created', <Time iso={delivery.created_at} />],
          ]} />
        </section>
        <section aria-labelledby="delivery-data-title">
          <h2 id="delivery-data-title">What it carries</h2>
          <Details value={delivery.data} />
        </section>
      </div>
      <AuditTrail entityType="notification_delivery" entityId={delivery.id} version={version} />
    </Page>
  );
}
