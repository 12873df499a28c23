// The console's requests at scale (issue 36): what one support person's page views ask of the
// daemon, timed one at a time, and five such people browsing beside client validation.
import { COMPANIES } from './scale-store.mjs';

const percentile = (values, p) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
};

async function timed(url, token, route) {
  const started = performance.now();
  const response = await fetch(`${url}${route}`, { headers: { authorization: `Bearer ${token}` } });
  const body = await response.text();
  const ms = performance.now() - started;
  if (response.status !== 200) throw new Error(`${route}: ${response.status} ${body.slice(0, 300)}`);
  return { ms, response, body };
}

/** p50 and p99 of `runs` requests made one after another, the routes taken in turn. */
async function series(url, token, routes, runs) {
  for (const route of routes.slice(0, 3)) await timed(url, token, route);
  const times = [];
  for (let n = 0; n < runs; n += 1) times.push((await timed(url, token, routes[n % routes.length])).ms);
  return { p50: percentile(times, 50), p99: percentile(times, 99), runs };
}

/** What a support person types: key prefixes without dashes, parts of names, hardware IDs, ids. */
export function searchQueries(sample, customers) {
  const queries = [];
  for (let k = 0; k < 40; k += 1) {
    const key = sample.licenseKeys[k % sample.licenseKeys.length];
    queries.push(key.replace(/-/g, '').slice(0, 6 + (k % 8)).toLowerCase());
    const c = Math.floor((k * 7919) % customers);
    const name = `${COMPANIES[c % COMPANIES.length]} ${c}`;
    queries.push(name.slice(3).toUpperCase());
    queries.push(sample.hardwareIds[k % sample.hardwareIds.length].slice(0, 12));
    queries.push(sample.licenseIds[(k * 3) % sample.licenseIds.length]);
  }
  return queries.map((q) => `/api/search?q=${encodeURIComponent(q)}`);
}

export const FILTERED_LISTS = {
  'status=active': '/api/licenses?status=active&limit=50',
  'status=expiring&within=30d': '/api/licenses?status=expiring&within=30d&limit=50',
  'status=expired&within=30d': '/api/licenses?status=expired&within=30d&limit=50',
  'type=hybrid&status=active': '/api/licenses?type=hybrid&status=active&limit=50',
  'usage=high': '/api/licenses?usage=high&limit=50',
  'seats=full': '/api/licenses?seats=full&limit=50',
};

/** The route of page `n` (1-based) of a list, walked by its Link headers. */
async function pageRoute(url, token, first, n) {
  let route = first;
  for (let page = 1; page < n; page += 1) {
    const { response } = await timed(url, token, route);
    const next = /<([^>]+)>\s*;\s*rel="next"/.exec(response.headers.get('link') ?? '')?.[1];
    if (!next) throw new Error(`${first} has only ${page} pages`);
    route = next;
  }
  return route;
}

/** Search, filtered list pages, page 1 against page 50, counts and the attention page, each timed alone. */
export async function consoleFigures({ url, token, sample, customers, runs = 200, log = () => undefined }) {
  const out = { search: await series(url, token, searchQueries(sample, customers), runs * 2), lists: {}, counts: {} };
  log(`console search p50 ${out.search.p50.toFixed(1)} ms p99 ${out.search.p99.toFixed(1)} ms`);
  for (const [name, route] of Object.entries(FILTERED_LISTS)) {
    out.lists[name] = await series(url, token, [route], runs);
    out.counts[name] = await series(url, token, [route.replace('/api/licenses?', '/api/licenses/count?').replace(/&?limit=50/, '')], Math.ceil(runs / 4));
    log(`console list ${name}: page p99 ${out.lists[name].p99.toFixed(1)} ms, count p99 ${out.counts[name].p99.toFixed(1)} ms`);
  }
  const first = FILTERED_LISTS['status=active'];
  const fiftieth = await pageRoute(url, token, first, 50);
  // Interleaved, so that both meet the same moments of the machine.
  const one = [];
  const fifty = [];
  for (let n = 0; n < runs; n += 1) {
    one.push((await timed(url, token, first)).ms);
    fifty.push((await timed(url, token, fiftieth)).ms);
  }
  out.page1 = { p50: percentile(one, 50), p99: percentile(one, 99) };
  out.page50 = { p50: percentile(fifty, 50), p99: percentile(fifty, 99) };
  log(`console page 1 p50 ${out.page1.p50.toFixed(1)} ms, page 50 p50 ${out.page50.p50.toFixed(1)} ms`);
  out.attention = await series(url, token, ['/api/attention'], Math.ceil(runs / 4));
  log(`console attention p50 ${out.attention.p50.toFixed(1)} ms p99 ${out.attention.p99.toFixed(1)} ms`);
  return out;
}

/**
 * `users` people browsing the console until `signal` aborts: each page view asks what the
 * console asks for it (the attention page; a filtered list with its count; a search; a
 * license with its machines and audit trail), then the person reads it for `thinkMs`.
 */
export async function consoleUsers({ url, token, sample, customers, users = 5, thinkMs = 1000, signal }) {
  const searches = searchQueries(sample, customers);
  const views = [
    () => ['/api/attention'],
    (k) => [Object.values(FILTERED_LISTS)[k % 5], `${Object.values(FILTERED_LISTS)[k % 5].replace('/api/licenses?', '/api/licenses/count?').replace(/&?limit=50/, '')}`],
    (k) => [searches[k % searches.length]],
    (k) => {
      const id = sample.licenseIds[k % sample.licenseIds.length];
      return [`/api/licenses/${id}`, `/api/machines?license_id=${id}&limit=100`, `/api/audit?entity_type=license&entity_id=${id}&limit=20`];
    },
  ];
  let pageViews = 0;
  let requests = 0;
  let errors = 0;
  const person = async (who) => {
    for (let k = who; !signal.aborted; k += users) {
      // A page's requests go out together, as the browser sends them.
      const results = await Promise.allSettled(views[k % views.length](k).map((route) => timed(url, token, route)));
      requests += results.length;
      errors += results.filter((result) => result.status === 'rejected').length;
      pageViews += 1;
      await new Promise((resolve) => setTimeout(resolve, thinkMs));
    }
  };
  await Promise.all(Array.from({ length: users }, (_, who) => person(who)));
  return { pageViews, requests, errors };
}
