import { useEffect, useState } from 'preact/hooks';
import { errorText, getJson } from '../api.js';
import { Page } from '../app.js';
import { age, relative, Time } from '../format.js';
import { act } from '../parts/status.js';
import { BASE } from '../router.js';
import type { ViewProps } from './index.js';

interface Figure {
  readonly count: number;
  readonly exact: boolean;
  readonly query: string;
  /** When it was counted: `at`, or the start of the daemon's background read for a count that scans. */
  readonly as_of?: string;
}

/** GET /api/attention (docs/http-api.md, "Attention"). */
interface Attention {
  readonly at: string;
  readonly counts: Readonly<Record<string, Figure>>;
  readonly backups: { readonly stale: boolean; readonly newest_success_at: string | null; readonly max_age_seconds: number; readonly query: string };
  readonly signing_key: { readonly key_id: string; readonly created_at: string; readonly age_seconds: number; readonly query: string } | null;
}

/** The console's page for an API list: /api/licenses?status=... is /admin/licenses?status=... */
export function consoleLink(apiQuery: string): string {
  const url = new URL(apiQuery, location.origin);
  const path = url.pathname
    .replace(/^\/api\/notifications\/deliveries/, '/api/deliveries')
    .replace(/^\/api\/backups\/status$/, '/api/backups')
    .replace(/^\/api\//, `${BASE}/`);
  return `${path}${url.search}`;
}

const GROUPS: ReadonlyArray<readonly [string, ReadonlyArray<readonly [string, string]>]> = [
  ['Licenses', [
    ['licenses_expiring_7d', 'ending within 7 days'],
    ['licenses_expiring_30d', 'ending within 30 days'],
    ['licenses_expired_7d', 'ended in the last 7 days'],
    ['licenses_at_machine_limit', 'at or over their machine limit'],
    ['licenses_usage_high', 'using 80% of a limit or more'],
  ]],
  ['Notifications', [
    ['deliveries_failed', 'deliveries failed'],
    ['deliveries_retrying', 'deliveries failing, retrying'],
  ]],
  ['Backups', [
    ['backup_targets_failing', 'off-site targets failing'],
  ]],
];

/** A signing key older than this is worth a rotation (docs/public-keys.md). */
const KEY_AGE_WORTH_ROTATING = 365 * 86_400;

function Card(props: { label: string; value: string; warn: boolean; link: string; name: string; asOf?: string | undefined }) {
  return (
    <li class={props.warn ? 'card warn' : 'card'} data-figure={props.name}>
      <a href={props.link}>
        <span class="figure">{props.value}</span>
        <span class="label">{props.label}</span>
        {props.asOf && <span class="as-of">counted {relative(props.asOf)}</span>}
      </a>
    </li>
  );
}

/** The home page: what needs someone's attention, each count a link to the rows behind it. */
export function AttentionView(_props: ViewProps) {
  const [answer, setAnswer] = useState<Attention | null>(null);
  const [failure, setFailure] = useState<string | null>(null);
  const load = () => getJson<Attention>('/api/attention').then((value) => { setAnswer(value); setFailure(null); }, (error) => setFailure(errorText(error)));
  useEffect(() => {
    void load();
    // Counts move with the clock and with every client: fresh each minute while the page is open.
    const timer = setInterval(load, 60_000);
    return () => clearInterval(timer);
  }, []);
  return (
    <Page title="Attention" actions={<button type="button" onClick={(event) => act(event.currentTarget, 'Counting…', async () => { await load(); return 'Counts refreshed.'; })}>Refresh</button>}>
      {failure && <p class="error" role="alert">{failure}</p>}
      {answer === null && !failure && <p>Loading…</p>}
      {answer && (
        <>
          {GROUPS.map(([group, figures]) => (
            <section key={group} aria-labelledby={`group-${group}`}>
              <h2 id={`group-${group}`}>{group}</h2>
              <ul class="cards">
                {figures.map(([name, label]) => {
                  const figure = answer.counts[name];
                  if (!figure) return null;
                  return <Card key={name} name={name} label={label} warn={figure.count > 0} link={consoleLink(figure.query)} value={`${figure.count.toLocaleString()}${figure.exact ? '' : '+'}`} asOf={figure.as_of !== undefined && figure.as_of !== answer.at ? figure.as_of : undefined} />;
                })}
                {group === 'Backups' && (
                  <Card
                    name="backups_stale"
                    label={answer.backups.newest_success_at ? `newest good backup (max age ${age(answer.backups.max_age_seconds)})` : 'no good backup yet'}
                    value={answer.backups.stale ? 'stale' : 'fresh'}
                    warn={answer.backups.stale}
                    link={consoleLink(answer.backups.query)}
                  />
                )}
                {group === 'Backups' && answer.signing_key && (
                  <Card
                    name="signing_key_age"
                    label={`signing key ${answer.signing_key.key_id} age`}
                    value={age(answer.signing_key.age_seconds)}
                    warn={answer.signing_key.age_seconds > KEY_AGE_WORTH_ROTATING}
                    link={consoleLink(answer.signing_key.query)}
                  />
                )}
              </ul>
            </section>
          ))}
          <p class="hint">As of <Time iso={answer.at} />. The license and delivery counts are the figures /metrics exports as <code>license_server_store_attention</code>.</p>
        </>
      )}
    </Page>
  );
}
