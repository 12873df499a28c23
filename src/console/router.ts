import { useEffect, useState } from 'preact/hooks';

// Every view has its own URL under /admin/ (the daemon answers each with the page), so back
// and forward work and a link pasted into a ticket opens the same view with the same filters.
export const BASE = '/admin';

export interface Place {
  /** The path under /admin, split: `/licenses/<id>` is ['licenses', '<id>']. */
  readonly parts: readonly string[];
  readonly query: URLSearchParams;
  /** What the page stored with this history entry (the cursors of earlier pages). */
  readonly state: unknown;
}

function here(): Place {
  const path = location.pathname.startsWith(BASE) ? location.pathname.slice(BASE.length) : '/';
  return { parts: path.split('/').filter(Boolean).map(decodeURIComponent), query: new URLSearchParams(location.search), state: history.state };
}

const listeners = new Set<() => void>();
const changed = () => {
  for (const listener of listeners) listener();
};
window.addEventListener('popstate', changed);

export function navigate(href: string, options: { replace?: boolean; state?: unknown } = {}): void {
  if (options.replace) history.replaceState(options.state ?? null, '', href);
  else history.pushState(options.state ?? null, '', href);
  changed();
  if (!options.replace) window.scrollTo(0, 0);
}

/** The address bar as a value that re-renders its users when it changes. */
export function usePlace(): Place {
  const [place, setPlace] = useState(here);
  useEffect(() => {
    const update = () => setPlace(here());
    listeners.add(update);
    return () => void listeners.delete(update);
  }, []);
  return place;
}

/** A link within the console: a click changes the view without loading the page again. */
export function interceptLinks(): void {
  document.addEventListener('click', (event) => {
    if (event.defaultPrevented || event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    const anchor = (event.target as Element | null)?.closest?.('a');
    if (!anchor || anchor.target || anchor.hasAttribute('download')) return;
    const url = new URL(anchor.href, location.href);
    if (url.origin !== location.origin || !url.pathname.startsWith(`${BASE}/`)) return;
    event.preventDefault();
    navigate(url.pathname + url.search);
  });
}

/** `/admin/licenses?status=expiring` from ('licenses', {status: 'expiring'}), empty values left out. */
export function href(path: string, query: Record<string, string | undefined> = {}): string {
  const search = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) if (value !== undefined && value !== '') search.set(name, value);
  const text = search.toString();
  return `${BASE}/${path}${text ? `?${text}` : ''}`;
}
