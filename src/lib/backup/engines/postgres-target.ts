import type pg from 'pg';
import { redactDatabaseUrl } from '../../config/redact.js';
import { LicenseServerError } from '../../errors.js';
import { TABLES } from '../../storage/migrations.js';
import { connect } from './postgres-restore.js';

/**
 * Checks the PostgreSQL database a restore would replace, before the backup is even read:
 * it must exist (else the operator is told how to create it), and hold nothing but
 * license-server's tables, unless `force`: a restore drops and re-creates our tables, and a
 * database shared with something else is more likely a wrong database.url than a plan.
 */
export async function checkPostgresTarget(url: string, options: { force?: boolean } = {}): Promise<void> {
  const client = await connect(url, 'license-server restore');
  try {
    if (!options.force) await refuseOtherTables(client, url);
    await refuseDependents(client, url);
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function refuseOtherTables(client: pg.Client, url: string): Promise<void> {
  const { rows } = await client.query<{ name: string }>(
    `SELECT table_name AS name FROM information_schema.tables
     WHERE table_schema = current_schema() AND NOT (table_name = ANY ($1::text[])) ORDER BY table_name`,
    [TABLES.map((table) => table.name)],
  );
  if (rows.length > 0) {
    const names = rows.slice(0, 5).map((row) => row.name).join(', ') + (rows.length > 5 ? ` and ${rows.length - 5} more` : '');
    throw new LicenseServerError(
      'DATABASE_NOT_EMPTY',
      `the PostgreSQL database ${redactDatabaseUrl(url)} holds tables that are not license-server's (${names}); nothing was changed`,
    );
  }
}

/**
 * A restore drops license-server's tables with CASCADE, which would take along whatever
 * else depends on them: views (in any schema) and other tables' foreign keys into them.
 * --force promises to leave other tables as they are, so these are refused with or
 * without it, named, before anything is changed.
 */
async function refuseDependents(client: pg.Client, url: string): Promise<void> {
  const { rows } = await client.query<{ description: string }>(
    `WITH ours AS (
       SELECT oid FROM pg_class
       WHERE relnamespace = current_schema()::regnamespace AND relkind IN ('r', 'p') AND relname = ANY ($1::text[])
     )
     SELECT DISTINCT description FROM (
       SELECT format('%s %I.%I', CASE v.relkind WHEN 'm' THEN 'materialized view' ELSE 'view' END, n.nspname, v.relname) AS description
       FROM pg_depend d
       JOIN pg_rewrite r ON d.classid = 'pg_rewrite'::regclass AND r.oid = d.objid
       JOIN pg_class v ON v.oid = r.ev_class
       JOIN pg_namespace n ON n.oid = v.relnamespace
       WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid IN (SELECT oid FROM ours) AND v.oid NOT IN (SELECT oid FROM ours)
       UNION ALL
       SELECT format('foreign key %I of %I.%I', c.conname, n.nspname, t.relname)
       FROM pg_constraint c
       JOIN pg_class t ON t.oid = c.conrelid
       JOIN pg_namespace n ON n.oid = t.relnamespace
       WHERE c.contype = 'f' AND c.confrelid IN (SELECT oid FROM ours) AND c.conrelid NOT IN (SELECT oid FROM ours)
     ) found ORDER BY description`,
    [TABLES.map((table) => table.name)],
  );
  if (rows.length === 0) return;
  const names = rows.slice(0, 5).map((row) => row.description).join(', ') + (rows.length > 5 ? ` and ${rows.length - 5} more` : '');
  throw new LicenseServerError(
    'DATABASE_NOT_EMPTY',
    `the PostgreSQL database ${redactDatabaseUrl(url)} has objects that depend on license-server's tables (${names}), which a restore would drop with them; nothing was changed`,
    { hint: 'Drop them (or their foreign keys) first and create them again after the restore; --force does not cover them.' },
  );
}
