import { BaseCommand } from '../cli/base-command.js';
import { formatRecord } from '../cli/output.js';
import type { InitReport } from '../lib/init-store.js';

const PARTS: Record<InitReport['created'][number], string> = {
  data_dir: 'data directory (0700)',
  database: 'database file (0600)',
  schema: 'schema',
  signing_key: 'signing key',
};

export default class Init extends BaseCommand<typeof Init> {
  static override description = `Create the data store, or report the one that is there.
A new store: the data directory (0700) and the SQLite database (0600), or the schema in an existing PostgreSQL database; the migrations; the Ed25519 signing key. An existing store is reported (path, engine, schema version, signing key fingerprint) and left unchanged. No admin token is created: \`serve\` prints a bootstrap token on its first start, or use \`token create\`. Only \`init\` and \`serve\` create a store; every other command refuses a missing one (DATABASE_NOT_FOUND).`;
  static override examples = ['<%= config.bin %> init', 'LICENSE_DATA_DIR=/var/lib/license-server <%= config.bin %> init --json'];

  async run(): Promise<InitReport> {
    const config = await this.resolveConfig();
    const [{ initStore }, { describeDatabaseOrigin }] = await Promise.all([import('../lib/init-store.js'), import('../lib/config/resolve.js')]);
    const report = await initStore(config.settings.database.url, this.operationContext(), {
      keyEncryptionKey: config.settings.signing.keyEncryptionKey,
      timeouts: config.settings.database,
    });
    const fresh = report.created.includes('schema');
    const done = fresh ? 'created a new store' : report.created.length > 0 || report.migrated ? 'completed the existing store' : 'the store exists; nothing changed';
    this.say(`${done}: ${report.engine} ${report.location}`);
    this.say(formatRecord([
      ['from', describeDatabaseOrigin(config)],
      ['created', report.created.map((part) => PARTS[part]).join(', ') || 'nothing'],
      ...(report.migrated ? [['migrated', `schema ${report.migrated.from} to ${report.migrated.to}`] as const] : []),
      ['schema version', report.schema_version],
      ['signing key fingerprint', report.signing_key_fingerprint],
      ['admin tokens', report.admin_tokens > 0 ? `${report.admin_tokens} live` : 'none yet (`serve` prints a bootstrap token on its first start)'],
    ]));
    return report;
  }
}
