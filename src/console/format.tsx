// Times as an operator reads them: relative ("in 3 days", "2 h ago") with the local time
// beside, and the exact UTC instant on hover; end dates as the last day included.

const RELATIVE = new Intl.RelativeTimeFormat(undefined, { numeric: 'auto', style: 'short' });
const LOCAL = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' });
const DAY = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeZone: 'UTC' });

const UNITS: ReadonlyArray<[Intl.RelativeTimeFormatUnit, number]> = [
  ['year', 365 * 86_400_000],
  ['month', 30 * 86_400_000],
  ['day', 86_400_000],
  ['hour', 3_600_000],
  ['minute', 60_000],
  ['second', 1000],
];

/** "in 3 days", "2 hr. ago": the largest unit that is at least one whole. */
export function relative(iso: string, now: number = Date.now()): string {
  const delta = Date.parse(iso) - now;
  for (const [unit, size] of UNITS) {
    if (Math.abs(delta) >= size || unit === 'second') return RELATIVE.format(Math.trunc(delta / size), unit);
  }
  return '';
}

/** The exact instant, as the API gives it, without milliseconds. */
export function utc(iso: string): string {
  return `${iso.replace(/\.\d+Z$/, 'Z').replace('T', ' ').replace('Z', ' UTC')}`;
}

/** A timestamp: relative first, local time after, exact UTC on hover. */
export function Time({ iso, empty = '-' }: { iso: string | null | undefined; empty?: string }) {
  if (!iso) return <span>{empty}</span>;
  return (
    <time dateTime={iso} title={utc(iso)}>
      {relative(iso)} <span class="local">({LOCAL.format(new Date(iso))})</span>
    </time>
  );
}

/**
 * valid_until is exclusive (a license "until 2027-01-31" ends at 2027-02-01T00:00:00Z): the
 * day shown is the last one included, the UTC date of the instant before the end.
 */
export function lastDayIncluded(validUntil: string): string {
  return new Date(Date.parse(validUntil) - 1).toISOString().slice(0, 10);
}

export function EndDate({ iso }: { iso: string }) {
  const ends = Date.parse(iso);
  const soon = ends > Date.now() && ends - Date.now() < 7 * 86_400_000;
  return (
    <time dateTime={iso} title={`Ends ${utc(iso)}: the last day included is ${lastDayIncluded(iso)} (UTC)`} class={soon ? 'soon' : undefined}>
      {DAY.format(new Date(ends - 1))} <span class="local">({relative(iso)})</span>
    </time>
  );
}

export function size(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(unit === 0 ? 0 : 1)} ${units[unit]}`;
}

/** 26h 5m, 3d 2h, 4m 10s, 6s: to compare with a maximum age at a glance. */
export function age(seconds: number): string {
  const days = Math.floor(seconds / 86400);
  const hours = Math.floor((seconds % 86400) / 3600);
  const minutes = Math.floor((seconds % 3600) / 60);
  if (days > 0) return `${days}d ${hours}h`;
  if (hours > 0) return `${hours}h ${minutes}m`;
  if (minutes > 0) return `${minutes}m ${Math.floor(seconds % 60)}s`;
  return `${Math.floor(seconds)}s`;
}

/**
 * Text from clients (hardware IDs, machine names) and token names as they can be shown: the
 * characters that change how text looks without being seen (bidirectional controls, zero-width
 * and format characters, line separators) written as escapes, so that one hardware ID cannot
 * pass for another. The same set as escapeInvisible in src/lib/validate.ts.
 */
const INVISIBLE = /[\p{Cf}\p{Default_Ignorable_Code_Point}\p{Bidi_Control}\p{Zl}\p{Zp}]/gu;
export function visible(text: string | null | undefined): string {
  if (text === null || text === undefined) return '';
  return String(text).replace(INVISIBLE, (char) => {
    const point = char.codePointAt(0)!;
    return point > 0xffff ? `\\u{${point.toString(16)}}` : `\\u${point.toString(16).padStart(4, '0')}`;
  });
}

/** A short id to show in a table: the whole id stays in the link and on hover. */
export function shortId(id: string): string {
  return id.length > 13 ? `${id.slice(0, 8)}…` : id;
}
