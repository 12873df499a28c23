import type { ComponentChildren } from 'preact';
import { shortId, visible } from '../format.js';
import { href } from '../router.js';
import { allows, type Session } from '../session.js';

/**
 * An audit entry's details or a delivery's data as a person reads them: one "name: value" line
 * each, nested objects flattened with dots ("moved.from: sqlite"), every string through
 * visible() (details quote names, hardware IDs and errors that clients and operators chose).
 */
export function Details({ value }: { value: Record<string, unknown> | null | undefined }) {
  const lines = value ? flatten(value, '') : [];
  if (lines.length === 0) return <span>-</span>;
  return (
    <dl class="details">
      {lines.map(([name, text]) => {
        const path = ID_PAGES[name];
        return (
          <div key={name}>
            <dt>{name}</dt>
            <dd>{path && UUID.test(text) ? <a href={href(`${path}/${text}`)}>{text}</a> : text}</dd>
          </div>
        );
      })}
    </dl>
  );
}

/** Ids in details and event data that name a record with a page of its own. */
const ID_PAGES: Readonly<Record<string, string>> = { license_id: 'licenses', customer_id: 'customers', machine_id: 'machines' };
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

function flatten(value: Record<string, unknown>, prefix: string, depth = 0): Array<[string, string]> {
  return Object.entries(value).flatMap(([name, item]): Array<[string, string]> => {
    const key = `${prefix}${visible(name)}`;
    if (item !== null && typeof item === 'object' && !Array.isArray(item) && depth < 2) {
      const inner = flatten(item as Record<string, unknown>, `${key}.`, depth + 1);
      return inner.length ? inner : [[key, '-']];
    }
    return [[key, text(item)]];
  });
}

function text(item: unknown): string {
  if (item === null || item === undefined) return 'none';
  if (typeof item === 'boolean') return item ? 'yes' : 'no';
  if (typeof item === 'string') return visible(item);
  if (typeof item === 'number') return String(item);
  if (Array.isArray(item)) {
    if (item.length === 0) return 'none';
    return item.map((element) => (element !== null && typeof element === 'object' && !Array.isArray(element) ? `(${inline(element as Record<string, unknown>)})` : text(element))).join(', ');
  }
  return `(${inline(item as Record<string, unknown>)})`;
}

/** {"code": "PRO", "usage_limit": null} as "code PRO, usage_limit none". */
function inline(value: Record<string, unknown>): string {
  return Object.entries(value).map(([name, item]) => `${visible(name)} ${typeof item === 'object' && item !== null && !Array.isArray(item) ? visible(JSON.stringify(item)) : text(item)}`).join(', ');
}

/**
 * The console page of a record an audit entry or a delivery names, when it has one: a license,
 * customer, machine, delivery or token (tokens for admin only: the page needs it).
 */
export function recordPath(entityType: string, entityId: string | null, session: Session): string | null {
  if (!entityId) return null;
  switch (entityType) {
    case 'license':
      return `licenses/${entityId}`;
    case 'customer':
      return `customers/${entityId}`;
    case 'machine':
      return `machines/${entityId}`;
    case 'notification_delivery':
      return `deliveries/${entityId}`;
    case 'entitlement':
      return `entitlements/${entityId}`;
    case 'admin_token':
      return allows(session, 'admin') ? `tokens/${entityId}` : null;
    default:
      return null;
  }
}

export function RecordLink({ entityType, entityId, session }: { entityType: string; entityId: string | null; session: Session }): ComponentChildren {
  const path = recordPath(entityType, entityId, session);
  const kind = entityType.replace(/_/g, ' ');
  const id = entityId ? visible(entityId) : '';
  // A linked id is cut short (the whole one is in the link and on hover); one without a page is shown whole.
  return path ? <a href={href(path)} title={id}>{kind} {shortId(id)}</a> : <span>{kind}{id ? ` ${id}` : ''}</span>;
}

/** A failure to show in place of a page's content. */
export function Failure({ text }: { text: string }) {
  return <p class="error" role="alert">{text}</p>;
}
