import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, getJson } from '../api.js';
import { href, navigate } from '../router.js';
import { visible } from '../format.js';

interface Group<T> {
  readonly items: T[];
  readonly more: boolean;
}

interface Hit {
  readonly kind: string;
  readonly label: string;
  readonly detail: string;
  readonly link: string;
}

/** The server's answer (GET /api/search), grouped by kind, turned into links to each record's page. */
export function hitsOf(answer: Record<string, unknown>): Hit[] {
  const hits: Hit[] = [];
  const group = <T,>(name: string) => (answer[name] as Group<T> | undefined)?.items ?? [];
  for (const license of group<{ id: string; key?: string; key_prefix: string; customer_name?: string; type?: string }>('licenses')) {
    hits.push({ kind: 'License', label: license.key ?? `${license.key_prefix}…`, detail: [license.customer_name, license.type].filter(Boolean).join(' · '), link: href(`licenses/${license.id}`) });
  }
  for (const customer of group<{ id: string; name: string; email?: string | null }>('customers')) {
    hits.push({ kind: 'Customer', label: customer.name, detail: customer.email ?? '', link: href(`customers/${customer.id}`) });
  }
  for (const machine of group<{ id: string; hardware_id: string; name?: string | null }>('machines')) {
    hits.push({ kind: 'Machine', label: visible(machine.hardware_id), detail: visible(machine.name), link: href(`machines/${machine.id}`) });
  }
  for (const entitlement of group<{ id: string; code: string; name: string }>('entitlements')) {
    hits.push({ kind: 'Entitlement', label: entitlement.code, detail: entitlement.name, link: href(`entitlements/${entitlement.id}`) });
  }
  for (const token of group<{ id: string; name: string; scopes: string[]; revoked: boolean }>('admin_tokens')) {
    hits.push({ kind: 'Token', label: visible(token.name), detail: `${token.scopes.join(', ')}${token.revoked ? ' (revoked)' : ''}`, link: href(`tokens/${token.id}`) });
  }
  for (const delivery of group<{ id: string; event: string; channel: string; status: string }>('notification_deliveries')) {
    hits.push({ kind: 'Delivery', label: delivery.event, detail: `${delivery.channel}, ${delivery.status}`, link: href(`deliveries/${delivery.id}`) });
  }
  for (const entry of group<{ id: number; action: string; actor: string; entity_type: string; entity_id: string | null }>('audit_entries')) {
    hits.push({ kind: 'Audit entry', label: `${entry.action} #${entry.id}`, detail: visible(entry.actor), link: href('audit', { entity_type: entry.entity_type, ...(entry.entity_id ? { entity_id: entry.entity_id } : {}) }) });
  }
  return hits;
}

/**
 * The search box on every page: a license by any prefix of its key (dashes and case as you
 * like), a customer by name or email, a machine by hardware ID or name, any record by id. The
 * server answers from its indexes; the box asks once typing pauses.
 */
export function SearchBox() {
  const [text, setText] = useState('');
  const [hits, setHits] = useState<Hit[] | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [active, setActive] = useState(0);
  const box = useRef<HTMLInputElement>(null);

  // "/" from anywhere but a text field jumps to the box, as in most consoles.
  useEffect(() => {
    const jump = (event: KeyboardEvent) => {
      const target = event.target as HTMLElement | null;
      if (event.key !== '/' || event.ctrlKey || event.metaKey || event.altKey) return;
      if (target && (target.isContentEditable || ['INPUT', 'TEXTAREA', 'SELECT'].includes(target.tagName))) return;
      event.preventDefault();
      box.current?.focus();
    };
    document.addEventListener('keydown', jump);
    return () => document.removeEventListener('keydown', jump);
  }, []);

  useEffect(() => {
    const q = text.trim();
    if (q.length === 0) {
      setHits(null);
      return;
    }
    const abort = new AbortController();
    const timer = setTimeout(() => {
      getJson<Record<string, unknown>>(`/api/search?q=${encodeURIComponent(q)}`, abort.signal)
        .then((answer) => {
          setHits(hitsOf(answer));
          setFailure(null);
          setActive(0);
        })
        .catch((error) => {
          if (!abort.signal.aborted) setFailure(errorText(error));
        });
    }, 150);
    return () => {
      clearTimeout(timer);
      abort.abort();
    };
  }, [text]);

  const open = (hit: Hit | undefined) => {
    if (!hit) return;
    setText('');
    setHits(null);
    navigate(hit.link);
  };

  return (
    <div class="search" role="search">
      <input
        ref={box}
        type="search"
        aria-label="Search"
        placeholder="Search keys, customers, emails, machines, ids  ( / )"
        value={text}
        autoComplete="off"
        aria-controls={hits !== null ? 'search-results' : undefined}
        onInput={(event) => setText(event.currentTarget.value)}
        onKeyDown={(event) => {
          if (event.key === 'Enter') {
            event.preventDefault();
            open(hits?.[active]);
          } else if (event.key === 'ArrowDown') {
            event.preventDefault();
            setActive((i) => Math.min(i + 1, (hits?.length ?? 1) - 1));
          } else if (event.key === 'ArrowUp') {
            event.preventDefault();
            setActive((i) => Math.max(i - 1, 0));
          } else if (event.key === 'Escape') {
            setText('');
          }
        }}
      />
      {(hits !== null || failure !== null) && (
        <div id="search-results" class="search-results" aria-live="polite">
          {failure !== null && <p class="error">{failure}</p>}
          {hits !== null && hits.length === 0 && <p>No match for “{text.trim()}”.</p>}
          {hits !== null && hits.length > 0 && (
            <ul aria-label="Search results">
              {hits.map((hit, i) => (
                <li key={hit.link} class={i === active ? 'active' : undefined}>
                  <a href={hit.link} onClick={() => { setText(''); setHits(null); }}>
                    <span class="kind">{hit.kind}</span> <span class="label">{hit.label}</span> <span class="detail">{hit.detail}</span>
                  </a>
                </li>
              ))}
            </ul>
          )}
        </div>
      )}
    </div>
  );
}
