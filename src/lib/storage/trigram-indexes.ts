/**
 * PostgreSQL's side of substring search (search/customers.ts): trigram indexes from the
 * pg_trgm extension. The extension is optional. It is trusted since PostgreSQL 13, so a role
 * with CREATE on the database may add it, but a role without that right, an older server or
 * a server without the contrib package cannot; the store must still migrate, restore and
 * search there, only without these indexes (a substring search then reads every customer).
 * So every statement below is guarded and never fails: the extension is created when it can
 * be, and an index is built only when the operator class is visible on the search path.
 *
 * Each statement is one line: a dump's loader (backup/engines/postgres-load.ts) and psql
 * read a statement up to a line that ends with `;`.
 */

const TRIGRAM_OPCLASS = 'gin_trgm_ops';

/** Creates pg_trgm in the current schema unless the database has it; any refusal leaves things as they were. */
export const CREATE_TRIGRAM_EXTENSION =
  "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_extension WHERE extname = 'pg_trgm') THEN BEGIN CREATE EXTENSION pg_trgm; EXCEPTION WHEN OTHERS THEN RAISE NOTICE 'pg_trgm is not available (%): substring search will read whole tables', SQLERRM; END; END IF; END $$";

/** `createIndex` run only where pg_trgm's operator class resolves. */
export function guardedTrigramIndex(createIndex: string): string {
  const quoted = createIndex.replace(/'/g, "''");
  return `DO $$ BEGIN IF EXISTS (SELECT 1 FROM pg_catalog.pg_opclass WHERE opcname = '${TRIGRAM_OPCLASS}' AND pg_catalog.pg_opclass_is_visible(oid)) THEN EXECUTE '${quoted}'; END IF; END $$`;
}

/** Whether an index definition (pg_get_indexdef) needs pg_trgm. */
export function usesTrigrams(indexDefinition: string): boolean {
  return new RegExp(`\\b${TRIGRAM_OPCLASS}\\b`).test(indexDefinition);
}

/** Customers by a substring of their name or email, case-insensitive (ILIKE). */
export const TRIGRAM_INDEXES = [
  `CREATE INDEX customers_name_trigrams ON customers USING gin (name ${TRIGRAM_OPCLASS})`,
  `CREATE INDEX customers_email_trigrams ON customers USING gin (email ${TRIGRAM_OPCLASS})`,
];
