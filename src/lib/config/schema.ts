/**
 * Every setting the tool knows: its key in config.yaml, its environment variable, its
 * command-line flag, its type and its default. docs/configuration.md mirrors this table and
 * test/lib/config/docs.test.ts keeps the two in step.
 */
export type SettingType = 'string' | 'path' | 'database-url' | 'integer' | 'boolean' | 'backup-key' | 'cron' | 'choice' | 'day-list' | 'target-list' | 'duration';

export interface SettingSpec {
  readonly key: string;
  readonly env: string;
  readonly flag?: string;
  readonly type: SettingType;
  readonly min?: number;
  readonly max?: number;
  readonly secret?: boolean;
  /** The accepted values of a 'choice'. */
  readonly choices?: readonly string[];
  /** Defaults may depend on the data directory; relative results resolve against the cwd. */
  readonly default?: (dataDir: string) => string | number | boolean;
  readonly description: string;
}

export const SETTINGS: readonly SettingSpec[] = [
  {
    key: 'data_dir',
    env: 'LICENSE_DATA_DIR',
    flag: 'data-dir',
    type: 'path',
    default: () => './data',
    description: 'Directory for the SQLite database, config.yaml and backups (created 0700).',
  },
  {
    key: 'database.url',
    env: 'LICENSE_DATABASE_URL',
    flag: 'database-url',
    type: 'database-url',
    default: (dataDir) => `${dataDir}/license-server.db`,
    description: 'A SQLite file path (or sqlite:PATH) or a postgres:// URL.',
  },
  {
    key: 'database.connect_timeout',
    env: 'LICENSE_DATABASE_CONNECT_TIMEOUT',
    type: 'integer',
    min: 1,
    max: 600,
    default: () => 5,
    description: 'PostgreSQL: seconds to wait for a connection, new or a free one of the pool, before DATABASE_UNAVAILABLE.',
  },
  {
    key: 'database.statement_timeout',
    env: 'LICENSE_DATABASE_STATEMENT_TIMEOUT',
    type: 'integer',
    min: 0,
    max: 3600,
    default: () => 10,
    description: 'PostgreSQL: seconds the server may spend on one statement of a request or command before it cancels it (0: no limit of ours). Backups, restores and migrations run without it.',
  },
  {
    key: 'database.query_timeout',
    env: 'LICENSE_DATABASE_QUERY_TIMEOUT',
    type: 'integer',
    min: 0,
    max: 3600,
    default: () => 15,
    description: 'PostgreSQL: seconds to wait for the answer to one statement before the connection is given up (0: no limit). Backups, restores and migrations run without it.',
  },
  {
    key: 'database.admin_statement_timeout',
    env: 'LICENSE_DATABASE_ADMIN_STATEMENT_TIMEOUT',
    type: 'integer',
    min: 0,
    max: 3600,
    default: () => 5,
    description: 'serve: seconds one database statement of an admin request may take before it is stopped with DATABASE_UNAVAILABLE (0: no limit of ours): PostgreSQL cancels it on the admin pool; SQLite stops the reader thread of admin reads.',
  },
  {
    key: 'server.host',
    env: 'LICENSE_HOST',
    flag: 'host',
    type: 'string',
    default: () => '127.0.0.1',
    description: 'Address the daemon listens on.',
  },
  {
    key: 'server.port',
    env: 'LICENSE_PORT',
    flag: 'port',
    type: 'integer',
    min: 0,
    max: 65535,
    default: () => 8080,
    description: 'Port the daemon listens on (0 picks a free one).',
  },
  {
    key: 'server.tls_cert',
    env: 'LICENSE_TLS_CERT',
    flag: 'tls-cert',
    type: 'path',
    description: 'PEM certificate (chain) file; with server.tls_key the daemon serves HTTPS.',
  },
  {
    key: 'server.tls_key',
    env: 'LICENSE_TLS_KEY',
    flag: 'tls-key',
    type: 'path',
    description: 'PEM private key file for server.tls_cert.',
  },
  {
    key: 'server.metrics_host',
    env: 'LICENSE_METRICS_HOST',
    type: 'string',
    default: () => '127.0.0.1',
    description: 'Address of the metrics listener (server.metrics_port), which serves GET /metrics without a token.',
  },
  {
    key: 'server.metrics_port',
    env: 'LICENSE_METRICS_PORT',
    type: 'integer',
    min: 0,
    max: 65535,
    description: 'Port of a second listener that serves only GET /metrics, without a token (0 picks a free one); unset: none.',
  },
  {
    key: 'server.request_timeout',
    env: 'LICENSE_REQUEST_TIMEOUT',
    type: 'integer',
    min: 1,
    max: 600,
    default: () => 30,
    description: 'Seconds a client has to send a whole request (headers: at most 10 of them).',
  },
  {
    key: 'server.restore_wait',
    env: 'LICENSE_RESTORE_WAIT',
    type: 'integer',
    min: 0,
    max: 3600,
    default: () => 300,
    description: 'Seconds a starting daemon waits for a restore of its database to finish before it refuses to start.',
  },
  {
    key: 'server.client_rate_limit',
    env: 'LICENSE_CLIENT_RATE_LIMIT',
    type: 'integer',
    min: 0,
    max: 1_000_000,
    default: () => 10,
    description: 'Requests per second per client address on /api/v1/validate and /api/v1/usage (0: no limit).',
  },
  {
    key: 'server.client_rate_burst',
    env: 'LICENSE_CLIENT_RATE_BURST',
    type: 'integer',
    min: 1,
    max: 1_000_000,
    default: () => 50,
    description: 'Requests a client address may make at once before the rate limit applies.',
  },
  {
    key: 'issuer',
    env: 'LICENSE_ISSUER',
    type: 'string',
    default: () => 'license-server',
    description: 'Identifier of this server, written into license files and grace tokens.',
  },
  {
    key: 'offline.request_window_days',
    env: 'LICENSE_OFFLINE_REQUEST_WINDOW_DAYS',
    type: 'integer',
    min: 1,
    max: 365,
    default: () => 7,
    description: 'Days an activation request may be checked out after it was made; its nonce is kept as long.',
  },
  {
    key: 'grace.hours',
    env: 'LICENSE_GRACE_HOURS',
    type: 'integer',
    min: 1,
    max: 8760,
    default: () => 72,
    description: 'Lifetime of a grace token issued by online validation.',
  },
  {
    key: 'notifications.allow_link_local',
    env: 'LICENSE_NOTIFICATIONS_ALLOW_LINK_LOCAL',
    type: 'boolean',
    default: () => false,
    description: 'Lets webhooks go to link-local addresses (169.254.0.0/16, fe80::/10), which are refused by default.',
  },
  {
    key: 'notifications.smtp.host',
    env: 'LICENSE_NOTIFICATIONS_SMTP_HOST',
    type: 'string',
    description: 'SMTP server (relay) that sends email notifications; unset: no email is sent.',
  },
  {
    key: 'notifications.smtp.port',
    env: 'LICENSE_NOTIFICATIONS_SMTP_PORT',
    type: 'integer',
    min: 1,
    max: 65535,
    // No fixed default: it follows notifications.smtp.tls (465, 587 or 25), see resolve.ts.
    description: 'Port of the SMTP server; unset: 465 for implicit TLS, 587 for STARTTLS, 25 for none.',
  },
  {
    key: 'notifications.smtp.tls',
    env: 'LICENSE_NOTIFICATIONS_SMTP_TLS',
    type: 'choice',
    choices: ['starttls', 'implicit', 'none'],
    default: () => 'starttls',
    description: 'starttls (STARTTLS required), implicit (TLS from the first byte) or none (only to a loopback host).',
  },
  {
    key: 'notifications.smtp.user',
    env: 'LICENSE_NOTIFICATIONS_SMTP_USER',
    type: 'string',
    description: 'User name for SMTP AUTH; unset: no authentication.',
  },
  {
    key: 'notifications.smtp.password',
    env: 'LICENSE_NOTIFICATIONS_SMTP_PASSWORD',
    type: 'string',
    secret: true,
    description: 'Password for SMTP AUTH (or notifications.smtp.password_file, not both).',
  },
  {
    key: 'notifications.smtp.password_file',
    env: 'LICENSE_NOTIFICATIONS_SMTP_PASSWORD_FILE',
    type: 'path',
    description: 'File holding the SMTP password, read at each send so that a rotated file counts.',
  },
  {
    key: 'notifications.smtp.from',
    env: 'LICENSE_NOTIFICATIONS_SMTP_FROM',
    type: 'string',
    description: 'From address of email notifications; required with notifications.smtp.host.',
  },
  {
    key: 'notifications.smtp.connect_timeout',
    env: 'LICENSE_NOTIFICATIONS_SMTP_CONNECT_TIMEOUT',
    type: 'integer',
    min: 1,
    max: 300,
    default: () => 10,
    description: 'Seconds to wait for the SMTP server to connect, greet, and answer each command.',
  },
  {
    key: 'notifications.smtp.ca_file',
    env: 'LICENSE_NOTIFICATIONS_SMTP_CA_FILE',
    type: 'path',
    description: 'PEM CA certificate(s) trusted for the SMTP server besides the system ones.',
  },
  {
    key: 'notifications.retry_first_delay',
    env: 'LICENSE_NOTIFICATIONS_RETRY_FIRST_DELAY',
    type: 'integer',
    min: 1,
    max: 86400,
    default: () => 30,
    description: 'Seconds before the first retry of a failed delivery; each further retry waits twice as long.',
  },
  {
    key: 'notifications.retry_max_delay',
    env: 'LICENSE_NOTIFICATIONS_RETRY_MAX_DELAY',
    type: 'integer',
    min: 1,
    max: 86400,
    default: () => 3600,
    description: 'Longest wait, in seconds, between two retries of a delivery.',
  },
  {
    key: 'notifications.give_up_after',
    env: 'LICENSE_NOTIFICATIONS_GIVE_UP_AFTER',
    type: 'integer',
    min: 1,
    max: 720,
    default: () => 24,
    description: 'Hours after which a delivery that keeps failing is given up.',
  },
  {
    key: 'notifications.prune_after_days',
    env: 'LICENSE_NOTIFICATIONS_PRUNE_AFTER_DAYS',
    type: 'integer',
    min: 1,
    max: 36500,
    default: () => 30,
    description: 'Days after which finished deliveries are deleted.',
  },
  {
    key: 'notifications.expiring_soon_days',
    env: 'LICENSE_NOTIFICATIONS_EXPIRING_SOON_DAYS',
    type: 'day-list',
    default: () => '30,7,1',
    description: 'Days before valid_until at which license.expiring_soon fires: distinct whole days 1-365, comma-separated.',
  },
  {
    key: 'admin_token',
    env: 'LICENSE_ADMIN_TOKEN',
    type: 'string',
    secret: true,
    description: 'A bootstrap admin API token (at least 24 characters), accepted besides stored tokens.',
  },
  {
    key: 'backup.enabled',
    env: 'LICENSE_BACKUP_ENABLED',
    type: 'boolean',
    default: () => false,
    description: 'Turns automatic backups on.',
  },
  {
    key: 'backup.schedule',
    env: 'LICENSE_BACKUP_SCHEDULE',
    type: 'cron',
    default: () => '0 2 * * *',
    description: 'When the daemon makes automatic backups: a cron expression in local time.',
  },
  {
    key: 'backup.path',
    env: 'LICENSE_BACKUP_PATH',
    type: 'path',
    default: (dataDir) => `${dataDir}/backups`,
    description: 'Directory that holds backups (created 0700).',
  },
  {
    key: 'backup.encryption_key',
    env: 'LICENSE_BACKUP_ENCRYPTION_KEY',
    type: 'backup-key',
    secret: true,
    description: 'AES-256 key for backups: 32 bytes as 64 hex digits or as Base64.',
  },
  {
    key: 'signing.key_encryption_key',
    env: 'LICENSE_SIGNING_KEY_ENCRYPTION_KEY',
    type: 'backup-key',
    secret: true,
    description: 'AES-256 key that seals the private signing keys in the database: 32 bytes as 64 hex digits or as Base64. Unset: keys are stored unsealed.',
  },
  {
    key: 'backup.retention_days',
    env: 'LICENSE_BACKUP_RETENTION_DAYS',
    type: 'integer',
    min: 1,
    max: 36500,
    default: () => 30,
    description: 'Backups older than this many days may be pruned (unless a keep_* rule keeps them).',
  },
  {
    key: 'backup.keep_daily',
    env: 'LICENSE_BACKUP_KEEP_DAILY',
    type: 'integer',
    min: 0,
    max: 3650,
    default: () => 7,
    description: 'Keep the newest backup of each of this many most recent days.',
  },
  {
    key: 'backup.keep_weekly',
    env: 'LICENSE_BACKUP_KEEP_WEEKLY',
    type: 'integer',
    min: 0,
    max: 520,
    default: () => 4,
    description: 'Keep the newest backup of each of this many most recent ISO weeks.',
  },
  {
    key: 'backup.keep_monthly',
    env: 'LICENSE_BACKUP_KEEP_MONTHLY',
    type: 'integer',
    min: 0,
    max: 1200,
    // 6, not 3: the newest backup of the 6th month back is at least 120 days old, so a month's
    // backup outlives the spec's 90 days on any schedule (3 kept nothing past 54 days).
    default: () => 6,
    description: 'Keep the newest backup of each of this many most recent months.',
  },
  {
    key: 'backup.max_age',
    env: 'LICENSE_BACKUP_MAX_AGE',
    type: 'duration',
    description: 'serve: raise backup.stale once when a place (local storage or a target) holds no good backup newer than this, such as 26h or 8d. Unset: no such alert.',
  },
  {
    key: 'backup.targets',
    env: 'LICENSE_BACKUP_TARGETS',
    type: 'target-list',
    description: 'Off-site targets every backup is copied to once verified: a list of file, s3 and sftp targets (in the environment, the same list as JSON). Credentials are named (*_env, *_file), never written here. A target\'s allow_unencrypted: true lets unencrypted backups be copied there and restored from there (refused otherwise, as anyone who can write to it could have put them there). See "Off-site targets".',
  },
];

export const ADMIN_TOKEN_MIN_LENGTH = 24;

export function specFor(key: string): SettingSpec | undefined {
  return SETTINGS.find((spec) => spec.key === key);
}
