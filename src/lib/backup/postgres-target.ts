import pg from 'pg';
import { redactDatabaseUrl } from '../config/redact.js';
import { LicenseServerError } from '../errors.js';
import { TABLES } from '../storage/migrations.js';

/**
 * Checks the PostgreSQL database a restore would replace, before the backup is even read:
 * it must exist (else the operator is told how to create it), and hold nothing but
 * license-server's tables, unless `force`: a restore drops and re-creates our tables, and a
 * database shared with something else is more likely a wrong database.url than a plan.
 */
export async function checkPostgresTarget(url: string, options: { force?: boolean } = {}): Promise<void> {
  const client = new pg.Client({ connectionString: url, application_name: 'license-server restore', connectionTimeoutMillis: 5000 });
  try {
    await client.connect();
  } catch (error) {
    await client.end().catch(() => undefined);
    if ((error as { code?: string }).code === '3D000') {
      const parsed = new URL(url);
      const name = decodeURIComponent(parsed.pathname.slice(1));
      const where = [parsed.hostname && `-h ${quoteShell(parsed.hostname)}`, parsed.port && `-p ${parsed.port}`, parsed.username && `-U ${quoteShell(decodeURIComponent(parsed.username))}`].filter(Boolean).join(' ');
      throw new LicenseServerError('DATABASE_NOT_FOUND', `the PostgreSQL database "${name}" does not exist on ${redactDatabaseUrl(url)}; a restore fills an existing database and does not create one`, {
        hint: `Create it first (as a role allowed to create databases), e.g. \`createdb ${where ? `${where} ` : ''}${quoteShell(name)}\`, then restore again.`,
      });
    }
    throw new LicenseServerError('DATABASE_UNAVAILABLE', `cannot connect to PostgreSQL: ${(error as { code?: string }).code ?? 'error'}`);
  }
  try {
    if (options.force) return;
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
  } finally {
    await client.end().catch(() => undefined);
  }
}

function quoteShell(name: string): string {
  return /^[A-Za-z0-9_.-]+$/.test(name) ? name : `'${name.replace(/'/g, "'\\''")}'`;
}
