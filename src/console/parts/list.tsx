import type { ComponentChildren, VNode } from 'preact';
import { useEffect, useState } from 'preact/hooks';
import { call, errorText, getJson, getList, save } from '../api.js';
import { href, navigate, usePlace } from '../router.js';
import { act } from './status.js';

export const PAGE_SIZE = 50;

interface PageState {
  /** The cursors of the pages before this one ('' for the first), to go back a page. */
  readonly earlier: readonly string[];
}

export interface Column<T> {
  readonly title: string;
  readonly cell: (item: T) => ComponentChildren;
  /** A value read whole (a time, a size, a count): it never wraps. */
  readonly value?: boolean;
}

interface Count {
  readonly count: number;
  readonly exact: boolean;
}

/**
 * One page of a server list, with previous and next: the page's cursor is in the address (a
 * pasted link opens the same page) and the cursors before it in the history entry. The page
 * never holds more than one page of rows.
 */
export function ListTable<T>(props: {
  /** The view's path under /admin (for the pager's links). */
  view: string;
  /** The API list, e.g. /api/licenses, and the filters from the address that it takes. */
  api: string;
  filters: Record<string, string | undefined>;
  /** The API's count route for the same filters, when it has one. */
  countApi?: string;
  columns: ReadonlyArray<Column<T>>;
  rowKey: (item: T) => string;
  rowData?: (item: T) => Record<string, string>;
  caption: string;
  empty: string;
  /** What the list calls its rows: "licenses". */
  noun: string;
  id: string;
  /** Bumped by the view to load the page again after an action. */
  reload?: number;
  /** JSON of a list inside an object (backups: {backups: [...]}), when not a bare array. */
  itemsOf?: (json: unknown) => T[];
  csv?: boolean;
}) {
  const place = usePlace();
  const cursor = place.query.get('cursor') ?? '';
  const state = (place.state ?? { earlier: [] }) as PageState;
  const [rows, setRows] = useState<{ items: T[]; next: string | null } | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const [count, setCount] = useState<Count | null>(null);
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(props.filters)) if (value !== undefined && value !== '') query.set(name, value);
  const filterText = query.toString();
  const listPath = `${props.api}?${filterText ? `${filterText}&` : ''}limit=${PAGE_SIZE}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;

  useEffect(() => {
    const abort = new AbortController();
    setFailure(null);
    setRows(null);
    (async () => {
      try {
        if (props.itemsOf) {
          const response = await call('GET', listPath, { signal: abort.signal });
          const link = response.headers.get('link');
          setRows({ items: props.itemsOf(await response.json()), next: link ? /<([^>]+)>\s*;\s*rel="next"/.exec(link)?.[1] ?? null : null });
        } else {
          setRows(await getList<T>(listPath, abort.signal));
        }
      } catch (error) {
        if (!abort.signal.aborted) setFailure(errorText(error));
      }
    })();
    return () => abort.abort();
  }, [listPath, props.reload]);

  useEffect(() => {
    if (!props.countApi) return;
    const abort = new AbortController();
    getJson<Count>(`${props.countApi}${filterText ? `?${filterText}` : ''}`, abort.signal)
      .then(setCount)
      // Without a count (a server without the route, a count refused) the list still works.
      .catch(() => setCount(null));
    return () => abort.abort();
  }, [props.countApi, filterText, props.reload]);

  const nextCursor = rows?.next ? new URL(rows.next, location.origin).searchParams.get('cursor') : null;
  const pageNumber = state.earlier.length + 1;
  const go = (to: string, earlier: readonly string[]) => navigate(href(props.view, { ...props.filters, cursor: to || undefined }), { state: { earlier } satisfies PageState });

  return (
    <div class="list" id={props.id}>
      <div class="list-head">
        <p class="count" aria-live="polite">
          {count === null ? '' : `${count.exact ? '' : 'about '}${count.count.toLocaleString()} ${props.noun}`}
        </p>
        {props.csv && (
          <button
            type="button"
            onClick={(event) =>
              act(event.currentTarget, `Exporting ${props.noun}…`, async () => {
                const name = await save(await call('GET', `${props.api}?${filterText ? `${filterText}&` : ''}format=csv`, { accept: 'text/csv' }), `${props.noun}.csv`);
                return `Exported ${props.noun} to ${name}.`;
              })}
          >
            Export CSV
          </button>
        )}
      </div>
      {failure !== null && <p class="error" role="alert">{failure}</p>}
      <div class="scroll">
        <table>
          <caption class="visually-hidden">{props.caption}</caption>
          <thead>
            <tr>{props.columns.map((column) => <th scope="col" key={column.title}>{column.title}</th>)}</tr>
          </thead>
          <tbody aria-busy={rows === null && failure === null ? 'true' : 'false'}>
            {rows?.items.map((item) => (
              <tr key={props.rowKey(item)} {...(props.rowData ? dataAttributes(props.rowData(item)) : {})}>
                {props.columns.map((column) => <td key={column.title} class={column.value ? 'value' : undefined}>{column.cell(item)}</td>)}
              </tr>
            ))}
            {rows !== null && rows.items.length === 0 && (
              <tr><td colSpan={props.columns.length}>{props.empty}</td></tr>
            )}
          </tbody>
        </table>
      </div>
      <nav class="pager" aria-label={`Pages of ${props.noun}`}>
        <button type="button" disabled={pageNumber === 1 && !cursor} onClick={() => go(state.earlier.at(-1) ?? '', state.earlier.slice(0, -1))}>Previous page</button>
        <span>Page {pageNumber}</span>
        <button type="button" disabled={nextCursor === null} onClick={() => go(nextCursor!, [...state.earlier, cursor])}>Next page</button>
      </nav>
    </div>
  );
}

function dataAttributes(values: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(values).map(([name, value]) => [`data-${name}`, value]));
}

/** A filter bar: each control changes the address (and so the list), dropping the cursor. */
export function FilterBar(props: { view: string; filters: Record<string, string | undefined>; children: ComponentChildren; label: string }) {
  return (
    <form
      class="filters"
      aria-label={props.label}
      onSubmit={(event) => {
        event.preventDefault();
        const data = new FormData(event.currentTarget);
        const next: Record<string, string> = {};
        for (const [name, value] of data) if (typeof value === 'string' && value !== '') next[name] = value;
        navigate(href(props.view, next));
      }}
      onChange={(event) => {
        // Selects apply at once; text boxes apply on Enter or with the button.
        if ((event.target as HTMLElement).tagName === 'SELECT') (event.currentTarget as HTMLFormElement).requestSubmit();
      }}
    >
      {props.children}
      <button type="submit">Apply</button>
      <a href={href(props.view)}>Clear</a>
    </form>
  );
}

export function Select(props: { name: string; label: string; value: string | undefined; options: ReadonlyArray<readonly [string, string]> }) {
  const id = `filter-${props.name}`;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <select id={id} name={props.name} value={props.value ?? ''}>
        {props.options.map(([value, text]) => <option key={value} value={value}>{text}</option>)}
      </select>
    </div>
  );
}

export function Input(props: { name: string; label: string; value: string | undefined; type?: 'text' | 'date' | 'email' | 'number' | 'datetime-local'; placeholder?: string; required?: boolean; min?: string; max?: string }) {
  const id = `field-${props.name}`;
  return (
    <div class="field">
      <label for={id}>{props.label}</label>
      <input id={id} name={props.name} type={(props.type ?? 'text') as 'text'} value={props.value ?? ''} placeholder={props.placeholder} required={props.required} min={props.min} max={props.max} autoComplete="off" />
    </div>
  );
}

export function Facts(props: { items: ReadonlyArray<readonly [string, ComponentChildren]> }): VNode {
  return (
    <dl class="facts">
      {props.items.map(([term, value]) => [<dt key={`t-${term}`}>{term}</dt>, <dd key={`d-${term}`}>{value}</dd>])}
    </dl>
  );
}
