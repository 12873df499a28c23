/**
 * The timestamp half of the output rule (README.md, "Output for scripts"): every time the
 * CLI prints and the HTTP API answers is RFC 3339 in UTC to the millisecond, as
 * Date.prototype.toISOString() writes it. Only signed documents (a .lic file's payload, a
 * grace token's claims) keep the whole seconds their formats fix.
 */
export const TIMESTAMP = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

/** Anything that starts like an RFC 3339 time, with whatever follows it. */
const TIME_LIKE = /\d{4}-\d{2}-\d{2}T[0-9:.]*(?:Z|[+-]\d{2}:?\d{2})?/g;

/** Every time-like text in `text` that is not in the one form. */
export function strayTimes(text: string): string[] {
  return [...text.matchAll(TIME_LIKE)].map((match) => match[0]).filter((found) => !TIMESTAMP.test(found));
}

/** The same over every string of a JSON document, each found with its path. */
export function strayTimesIn(value: unknown, at = '$'): string[] {
  if (typeof value === 'string') return strayTimes(value).map((found) => `${at}: ${found}`);
  if (Array.isArray(value)) return value.flatMap((item, i) => strayTimesIn(item, `${at}[${i}]`));
  if (value && typeof value === 'object') return Object.entries(value).flatMap(([key, item]) => strayTimesIn(item, `${at}.${key}`));
  return [];
}

/** The records of a document that do not name themselves by `idKey`. */
export function unnamedRecords(records: readonly unknown[], idKey: 'id' | 'key_id' = 'id'): unknown[] {
  return records.filter((record) => {
    const named = (record as Record<string, unknown> | null)?.[idKey];
    return typeof named !== 'string' && typeof named !== 'number';
  });
}
