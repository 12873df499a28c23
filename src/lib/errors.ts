/**
 * The one table of error codes. Every error the tool reports on purpose carries a code
 * from here; the CLI turns it into an exit code and a "Try:" line, the HTTP listener into
 * a status and `{"error":{"code","message"}}`. Anything that is not a LicenseServerError
 * is a bug and is reported as INTERNAL without its internals.
 *
 * docs/errors.md lists every code; test/lib/errors.test.ts fails when one is missing.
 */
export const EXIT = {
  ok: 0,
  internal: 1,
  usage: 2,
  config: 3,
  notFound: 4,
  conflict: 5,
  refused: 6,
  unavailable: 7,
  licenseFile: 8,
  signature: 9,
  validity: 10,
  hardware: 11,
  io: 12,
  backup: 13,
  backupKey: 14,
  notDelivered: 15,
  copyFailed: 16,
  stale: 17,
  drillFailed: 18,
} as const;

interface ErrorSpec {
  readonly exit: number;
  readonly http: number;
  readonly hint?: string;
}

export const ERROR_TABLE = {
  INTERNAL: { exit: EXIT.internal, http: 500, hint: 'This is a bug; please report it with the command that caused it.' },
  USAGE: { exit: EXIT.usage, http: 400, hint: 'See --help for the accepted flags and arguments.' },
  COMMAND_NOT_FOUND: { exit: EXIT.usage, http: 404, hint: 'See `license-server --help` for the commands.' },
  INVALID_INPUT: { exit: EXIT.usage, http: 400, hint: 'Check the value named above; --help shows the accepted forms.' },
  INVALID_ID: { exit: EXIT.usage, http: 400, hint: 'Ids are UUIDs such as 0b6c4f8e-3a1d-4e8e-9c2b-5f0d7a1e2c3b.' },
  INVALID_DATE: {
    exit: EXIT.usage,
    http: 400,
    hint: 'Use YYYY-MM-DD or an RFC 3339 timestamp such as 2027-01-31T00:00:00Z.',
  },
  INVALID_LICENSE_TYPE: { exit: EXIT.usage, http: 400, hint: 'The types are time_based, usage_based and hybrid.' },
  INVALID_ENTITLEMENT_CODE: {
    exit: EXIT.usage,
    http: 400,
    hint: 'A code is 1-64 letters, digits, "_", "." or "-", starting with a letter or digit.',
  },
  INVALID_VALIDITY: { exit: EXIT.usage, http: 400, hint: 'valid_until must be in the future and after valid_from.' },
  INVALID_TTL_DAYS: { exit: EXIT.usage, http: 400, hint: 'ttl_days is a whole number of days from 1 to 365.' },
  INVALID_HARDWARE_ID: {
    exit: EXIT.usage,
    http: 400,
    hint: 'A hardware ID is 1-256 characters without control characters, exactly as the client reports it.',
  },
  FILE_UNREADABLE: { exit: EXIT.usage, http: 400, hint: 'Check the path and its permissions.' },
  PUBLIC_KEY_INVALID: {
    exit: EXIT.usage,
    http: 400,
    hint: 'Pass the PEM that `license-server signing-key show` prints (an Ed25519 "PUBLIC KEY").',
  },
  INVALID_JSON: { exit: EXIT.usage, http: 400, hint: 'Send a JSON object as the request body.' },
  UNAUTHORIZED: {
    exit: EXIT.usage,
    http: 401,
    hint: 'Send "Authorization: Bearer <token>" with a token from `license-server token create`.',
  },
  TOKEN_EXPIRED: { exit: EXIT.usage, http: 401, hint: 'The token has passed its expiry; create a new one with `license-server token create`.' },
  INVALID_SCOPE: { exit: EXIT.usage, http: 400, hint: 'The scopes are read, licenses, backups, restore, metrics and admin.' },
  ROUTE_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'See docs/http-api.md for the routes.' },
  METHOD_NOT_ALLOWED: { exit: EXIT.usage, http: 405, hint: 'The Allow header lists the methods of this route.' },
  REQUEST_TIMEOUT: { exit: EXIT.usage, http: 408, hint: 'Send the whole request within the server\'s request timeout.' },
  BODY_TOO_LARGE: { exit: EXIT.usage, http: 413, hint: 'Request bodies are limited to 1 MiB.' },
  UNSUPPORTED_MEDIA_TYPE: { exit: EXIT.usage, http: 415, hint: 'Send "Content-Type: application/json".' },
  CSV_MALFORMED: { exit: EXIT.usage, http: 400, hint: 'Save the file as CSV (comma-separated, UTF-8) from the spreadsheet, or fix the line named above: a field with a comma, quote or line break is enclosed in double quotes, and a quote inside it is doubled.' },
  IMPORT_COLUMNS_INVALID: { exit: EXIT.usage, http: 400, hint: 'The header row names the columns; docs/http-api.md ("CSV export and import") lists those an import reads and those it ignores.' },
  IMPORT_INVALID: { exit: EXIT.usage, http: 400, hint: 'Nothing was imported. A dry run (--dry-run, or ?dry_run=true) lists every row\'s error by line; fix them and import again.' },
  IMPORT_TOO_LARGE: { exit: EXIT.usage, http: 413, hint: 'Split the file into parts within the limits named above and import each.' },
  RATE_LIMITED: { exit: EXIT.refused, http: 429, hint: 'Wait for the number of seconds in the Retry-After header.' },
  CONFIG_FILE_UNREADABLE: { exit: EXIT.config, http: 500, hint: 'Check the path given by --config or LICENSE_CONFIG.' },
  CONFIG_PARSE_ERROR: { exit: EXIT.config, http: 500, hint: 'The configuration file must be a YAML mapping.' },
  CONFIG_UNKNOWN_KEY: { exit: EXIT.config, http: 500, hint: 'See docs/configuration.md for the known keys.' },
  CONFIG_INVALID_VALUE: { exit: EXIT.config, http: 500, hint: 'See docs/configuration.md for the accepted values.' },
  CUSTOMER_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List customers with `license-server customer list`.' },
  ENTITLEMENT_NOT_FOUND: {
    exit: EXIT.notFound,
    http: 404,
    hint: 'List entitlements with `license-server entitlement list`.',
  },
  LICENSE_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List licenses with `license-server license list`.' },
  MACHINE_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List machines with `license-server machine list --license ID`.' },
  BULK_JOB_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'GET /api/bulk lists the bulk jobs.' },
  TOKEN_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List tokens with `license-server token list`.' },
  DELIVERY_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List deliveries with `license-server notifications deliveries`.' },
  SIGNING_KEY_MISSING: {
    exit: EXIT.notFound,
    http: 404,
    hint: 'Pass --public-key with the server\'s PEM, or run where the server\'s data is.',
  },
  SIGNING_KEY_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List the keys with `license-server signing-key list`.' },
  SIGNING_KEY_ACTIVE: {
    exit: EXIT.refused,
    http: 422,
    hint: 'The active key signs everything new: rotate to a new key first (`license-server signing-key rotate`).',
  },
  SIGNING_KEY_IN_USE: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Wait until the time named above, or pass --force to stop trusting those files and tokens now.',
  },
  SIGNING_KEY_RETIRED: { exit: EXIT.conflict, http: 409, hint: 'A retired key is gone for good; `signing-key list` shows the keys that verify.' },
  SIGNING_KEY_CONFLICT: { exit: EXIT.conflict, http: 409, hint: 'Another rotation finished first; `signing-key list` shows the active key.' },
  SIGNING_KEY_EXISTS: { exit: EXIT.conflict, http: 409, hint: 'The store already holds this key; `signing-key list` shows it.' },
  SIGNING_KEK_REQUIRED: {
    exit: EXIT.config,
    http: 500,
    hint: 'Set signing.key_encryption_key (or LICENSE_SIGNING_KEY_ENCRYPTION_KEY) to the key-encryption key that sealed the keys.',
  },
  SIGNING_KEK_WRONG: {
    exit: EXIT.config,
    http: 500,
    hint: 'Set signing.key_encryption_key to the key-encryption key the keys were sealed with (the kek ids above must match).',
  },
  SIGNING_KEK_NOT_IN_DAEMON: {
    exit: EXIT.refused,
    http: 409,
    hint: 'Restart those daemons with signing.key_encryption_key (LICENSE_SIGNING_KEY_ENCRYPTION_KEY) set to this key first (they sign with unsealed keys too), then protect again; or pass --force, and they sign nothing until restarted with it.',
  },
  SIGNING_KEY_DAMAGED: {
    exit: EXIT.unavailable,
    http: 500,
    hint: 'The stored private key was changed or damaged: restore a backup, or import the key from its escrow export.',
  },
  KEY_FILE_INVALID: { exit: EXIT.usage, http: 400, hint: 'Give a file that `license-server signing-key export` wrote (an encrypted PKCS#8 PEM).' },
  PASSPHRASE_REQUIRED: {
    exit: EXIT.usage,
    http: 400,
    hint: 'Pass --passphrase-file, or run on a terminal to be asked for the passphrase.',
  },
  ENTITLEMENT_CODE_EXISTS: { exit: EXIT.conflict, http: 409, hint: 'Entitlement codes are unique; pick another code.' },
  TOKEN_NAME_EXISTS: { exit: EXIT.conflict, http: 409, hint: 'Pick another name; `license-server token list --all` shows the names taken, revoked tokens\' included.' },
  BULK_JOB_RUNNING: {
    exit: EXIT.conflict,
    http: 409,
    hint: 'Wait for it to finish (GET /api/bulk/{id} shows its progress), or cancel it with POST /api/bulk/{id}/cancel.',
  },
  BULK_JOB_FINISHED: { exit: EXIT.conflict, http: 409, hint: 'Only a queued or running job can be cancelled; GET /api/bulk/{id} shows how it ended.' },
  IDEMPOTENCY_KEY_REUSED: {
    exit: EXIT.conflict,
    http: 409,
    hint: 'An idempotency key names one report; use a new key for a different report.',
  },
  FILE_EXISTS: { exit: EXIT.conflict, http: 409, hint: 'Pass --force to replace it, or choose another --out.' },
  LICENSE_INACTIVE: { exit: EXIT.refused, http: 422, hint: 'Activate it with `license-server license activate`.' },
  CUSTOMER_INACTIVE: { exit: EXIT.refused, http: 422, hint: 'Activate the customer with `license-server customer activate`.' },
  HARDWARE_ID_REQUIRED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'This license carries a decryption key, which is only ever sealed to one machine: pass --hardware-id.',
  },
  MACHINE_KEY_REQUIRED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'This license is bound with --binding machine-key: check it out from the machine\'s activation request (`license checkout --request FILE`), which carries its machine key.',
  },
  USAGE_LIMIT_EXCEEDED: { exit: EXIT.refused, http: 422, hint: 'The entitlement\'s usage limit would be exceeded.' },
  MACHINE_LIMIT_EXCEEDED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Every seat of the license is taken: `license-server machine list --license ID --holding-seat` shows by what. Free one with `machine deactivate ID`, or with `machine release ID --lost-file` when an offline file was lost; or raise --max-machines.',
  },
  MACHINE_DEACTIVATED: { exit: EXIT.refused, http: 422, hint: 'Activate the machine again with `license-server machine activate`.' },
  SEAT_REQUIRED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'On a license with a machine limit, usage is counted only from a machine that holds a seat: validate online first.',
  },
  TOKEN_SCOPE: {
    exit: EXIT.refused,
    http: 403,
    hint: 'This token\'s scopes do not cover the route; use a token with the scope that docs/http-api.md names for it.',
  },
  TOKEN_SELF_REVOKE: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Sign in with another token to revoke this one, or send {"allow_self": true} to revoke the token you are using.',
  },
  TOKEN_IN_CONFIGURATION: {
    exit: EXIT.refused,
    http: 422,
    hint: 'The configured token (admin_token, LICENSE_ADMIN_TOKEN) is not stored: remove or change it in the configuration and restart the daemon.',
  },
  BACKUP_UNENCRYPTED: {
    exit: EXIT.refused,
    http: 403,
    hint: 'Download it with an admin token, or set backup.encryption_key so that new backups are encrypted and a backups token may download them.',
  },
  WEBHOOK_ADDRESS_REFUSED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Webhooks never go to link-local addresses (169.254.0.0/16, fe80::/10) unless notifications.allow_link_local is true.',
  },
  DELIVERY_TARGET_GONE: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Define or enable the webhook again (`license-server notifications set`), or give the customer a contact email (`customer update --email`), then redeliver.',
  },
  WEBHOOK_NOT_DELIVERED: {
    exit: EXIT.notDelivered,
    http: 502,
    hint: 'The table gives each webhook\'s HTTP status or connection error: check the receiver, and the URL with `license-server notifications show`.',
  },
  EMAIL_NOT_DELIVERED: {
    exit: EXIT.notDelivered,
    http: 502,
    hint: 'The table gives the SMTP server\'s answer or the connection error: check notifications.smtp.* (`license-server config show`) and the relay.',
  },
  SMTP_NOT_CONFIGURED: {
    exit: EXIT.config,
    http: 500,
    hint: 'Set notifications.smtp.host and notifications.smtp.from (LICENSE_NOTIFICATIONS_SMTP_HOST, LICENSE_NOTIFICATIONS_SMTP_FROM); see docs/configuration.md.',
  },
  LICENSE_FILE_MALFORMED: { exit: EXIT.licenseFile, http: 400, hint: 'Copy the file again from its source; it is damaged or not a .lic file.' },
  LICENSE_FILE_UNSUPPORTED_VERSION: { exit: EXIT.licenseFile, http: 400, hint: 'Upgrade license-server to read this file.' },
  LICENSE_FILE_WRONG_REQUEST: {
    exit: EXIT.hardware,
    http: 422,
    hint: 'Install the file made from this machine\'s pending request, or make a new request and check that one out.',
  },
  ACTIVATION_REQUEST_MALFORMED: {
    exit: EXIT.licenseFile,
    http: 400,
    hint: 'Copy the request file again from the machine that made it (`license-server-client request`); it is damaged or not a request.',
  },
  ACTIVATION_REQUEST_WRONG_LICENSE: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Check out the license whose key the machine was given, or make the request again with the right key.',
  },
  ACTIVATION_REQUEST_EXPIRED: {
    exit: EXIT.validity,
    http: 422,
    hint: 'Make a new request on the machine (`license-server-client request`) and check that one out.',
  },
  ACTIVATION_REQUEST_REPLAYED: {
    exit: EXIT.conflict,
    http: 409,
    hint: 'Make a new request on the machine (`license-server-client request`) and check that one out.',
  },
  SIGNATURE_INVALID: {
    exit: EXIT.signature,
    http: 400,
    hint: 'The file was changed, or signed by another server: verify with the PEM from GET /api/signing-key.',
  },
  LICENSE_EXPIRED: { exit: EXIT.validity, http: 422, hint: 'Create a new offline license with `license-server license checkout`.' },
  LICENSE_NOT_YET_VALID: { exit: EXIT.validity, http: 422, hint: 'Check the system clock.' },
  HARDWARE_MISMATCH: { exit: EXIT.hardware, http: 422, hint: 'Check out the license again with the right --hardware-id.' },
  DECRYPTION_FAILED: { exit: EXIT.hardware, http: 422, hint: 'Check out the license again with the right --hardware-id.' },
  MACHINE_KEY_MISSING: {
    exit: EXIT.hardware,
    http: 422,
    hint: 'The file\'s decryption key is sealed to the machine\'s own key: pass the machine\'s private key (--machine-private-key FILE), which the client keeps from its activation request.',
  },
  GRACE_TOKEN_INVALID: { exit: EXIT.signature, http: 400, hint: 'Validate online again to get a new grace token.' },
  GRACE_TOKEN_EXPIRED: { exit: EXIT.validity, http: 422, hint: 'Validate online again to get a new grace token.' },
  LISTEN_FAILED: { exit: EXIT.unavailable, http: 500, hint: 'Pick a free port with --port, or stop what listens there.' },
  RESTORE_IN_PROGRESS: { exit: EXIT.unavailable, http: 503, hint: 'Retry after the seconds in the Retry-After header.' },
  SHUTTING_DOWN: { exit: EXIT.unavailable, http: 503, hint: 'The server is stopping; retry against another instance or after restart.' },
  TARGET_NOT_CONFIGURED: { exit: EXIT.config, http: 404, hint: 'The targets are the names under backup.targets; `license-server config show` lists them.' },
  TARGET_UNAVAILABLE: {
    exit: EXIT.unavailable,
    http: 502,
    hint: 'Check that the target is up and has room, and its settings under backup.targets (`license-server config show`); the message says what failed.',
  },
  TARGET_AUTH_FAILED: {
    exit: EXIT.config,
    http: 502,
    hint: 'Check the target\'s credentials, and for SFTP its pinned host key (host_key_fingerprint or known_hosts_file): a changed host key is never accepted.',
  },
  BACKUP_COPY_FAILED: {
    exit: EXIT.copyFailed,
    http: 502,
    hint: 'The backup was made, verified and kept here; the summary names each target that has no copy and why. `backup copy ID --to NAME` copies it once the target is back.',
  },
  BACKUP_STALE: {
    exit: EXIT.stale,
    http: 503,
    hint: '`license-server backup status` shows each place\'s newest good backup and last error.',
  },
  REPLICA_MOMENT_UNAVAILABLE: {
    exit: EXIT.notFound,
    http: 404,
    hint: 'The message gives the moments the replica can restore to; retention is backup.replication.retention.',
  },
  RESTORE_DRILL_FAILED: {
    exit: EXIT.drillFailed,
    http: 500,
    hint: 'The message names the check that failed and the backup or replica it failed on; `license-server backup drill --json` lists every check. docs/replication.md, "Restore drills".',
  },
  REPLICATION_UNAVAILABLE: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Check backup.replication and the targets it names (`license-server config show`), and that the Litestream binary runs (LICENSE_LITESTREAM_BIN); docs/replication.md.',
  },
  BACKUP_NOT_FOUND: { exit: EXIT.notFound, http: 404, hint: 'List backups with `license-server backup list`.' },
  BACKUP_IN_PROGRESS: { exit: EXIT.conflict, http: 409, hint: 'Another backup, restore or prune is running; try again when it is done.' },
  DATABASE_IN_USE: {
    exit: EXIT.conflict,
    http: 409,
    hint: 'Stop the daemon first, or restore through its API (POST /api/backups/{id}/restore).',
  },
  RESTORE_NOT_CONFIRMED: { exit: EXIT.usage, http: 400, hint: 'Pass --yes to restore without a prompt.' },
  RESTORE_KEYS_NOT_CONFIRMED: {
    exit: EXIT.usage,
    http: 400,
    hint: '`backup restore --dry-run` shows the keys it would replace. If this server is to take the backup\'s keys and admin tokens, confirm that on its own: --replace-keys (API: "replace_keys": true, with an admin token; admin page: tick the box the form shows).',
  },
  BACKUP_UNENCRYPTED_REFUSED: {
    exit: EXIT.refused,
    http: 422,
    hint: 'Restore an encrypted backup from the target, or set allow_unencrypted: true on the target only if everyone who can write to it may hand this server its data.',
  },
  BACKUP_INVALID: { exit: EXIT.backup, http: 422, hint: 'This file is not a license-server backup, or not a complete one.' },
  BACKUP_CORRUPT: { exit: EXIT.backup, http: 422, hint: 'The file is damaged; use another backup.' },
  BACKUP_UNSUPPORTED: { exit: EXIT.backup, http: 422, hint: 'Restore it with a license-server as new as the one that made it.' },
  BACKUP_NOT_PORTABLE: {
    exit: EXIT.backup,
    http: 422,
    hint: 'Correct the named value in the source database and back up again, or restore onto the engine the backup was made on.',
  },
  DATABASE_NOT_EMPTY: {
    exit: EXIT.conflict,
    http: 409,
    hint: 'Point database.url at a database of its own for license-server, or pass --force (API: "force": true) to restore beside the other tables.',
  },
  BACKUP_KEY_REQUIRED: { exit: EXIT.backupKey, http: 422, hint: 'Set LICENSE_BACKUP_ENCRYPTION_KEY to the key the backup was made with.' },
  BACKUP_WRONG_KEY: { exit: EXIT.backupKey, http: 422, hint: 'Set LICENSE_BACKUP_ENCRYPTION_KEY to the key the backup was made with. If it is that key, the salt or key check value in the backup\'s header is damaged (the check cannot tell the two apart): use another copy of the backup.' },
  FILE_WRITE_FAILED: { exit: EXIT.io, http: 500, hint: 'Check free space, permissions and that the medium is still mounted.' },
  DATABASE_UNAVAILABLE: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Check database.url (LICENSE_DATABASE_URL) and that the database is running.',
  },
  DATABASE_NOT_FOUND: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Point at the right store with --data-dir or LICENSE_DATA_DIR, --database-url or LICENSE_DATABASE_URL, or --config; or create a new one with `license-server init`.',
  },
  DATABASE_PERMISSION_DENIED: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Run the command as the user that owns the store, or give this user access to the path named above.',
  },
  DATABASE_DISK_FULL: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Free space where the database is stored (SQLite: the file system of its file; PostgreSQL: the server\'s data directory or the database\'s tablespace), then try again; nothing was written.',
  },
  DATABASE_REPLACED: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'Something replaced the SQLite file outside license-server\'s locks (an older release, or by hand): restart the daemon, then check the data.',
  },
  DATABASE_SCHEMA_TOO_NEW: {
    exit: EXIT.unavailable,
    http: 503,
    hint: 'The database was migrated by a newer license-server; upgrade this one.',
  },
} as const satisfies Record<string, ErrorSpec>;

export type ErrorCode = keyof typeof ERROR_TABLE;

export class LicenseServerError extends Error {
  readonly code: ErrorCode;
  readonly exitCode: number;
  readonly httpStatus: number;
  readonly hint: string | undefined;

  constructor(code: ErrorCode, message: string, options?: { hint?: string; cause?: unknown }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    const spec: ErrorSpec = ERROR_TABLE[code];
    this.name = 'LicenseServerError';
    this.code = code;
    this.exitCode = spec.exit;
    this.httpStatus = spec.http;
    this.hint = options?.hint ?? spec.hint;
  }
}

export function isLicenseServerError(value: unknown): value is LicenseServerError {
  return value instanceof LicenseServerError;
}
