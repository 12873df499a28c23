/**
 * The JSON Schemas (2020-12, as OpenAPI 3.1 takes them) of the API's bodies, one per record
 * that docs/http-api.md names. Records are closed (`additionalProperties: false`), so a field
 * added to an answer fails the suite's response check until it is documented here too.
 */

import { SCOPES } from '../../src/lib/admin-tokens.js';

export type Schema = Record<string, unknown>;

export const ref = (name: string): Schema => ({ $ref: `#/components/schemas/${name}` });
const string: Schema = { type: 'string' };
const time: Schema = { type: 'string', format: 'date-time' };
/** target.ts TargetFailure: why a target failed. */
const TARGET_FAILURES = ['unreachable', 'timeout', 'auth', 'host-key', 'missing', 'full', 'protocol'];
const uuid: Schema = { type: 'string', format: 'uuid' };
const integer: Schema = { type: 'integer' };
const boolean: Schema = { type: 'boolean' };
/** The schema or null; an enum must list null too, or null fails it whatever `type` says. */
const nullable = (schema: Schema): Schema => ({ ...schema, type: [schema.type as string, 'null'], ...(Array.isArray(schema.enum) ? { enum: [...schema.enum, null] } : {}) });
const array = (items: Schema): Schema => ({ type: 'array', items });

/** A closed object: every listed property is required unless named in `optional`. */
export function object(properties: Record<string, Schema>, optional: readonly string[] = [], description?: string): Schema {
  return {
    type: 'object',
    ...(description === undefined ? {} : { description }),
    properties,
    required: Object.keys(properties).filter((name) => !optional.includes(name)),
    additionalProperties: false,
  };
}

const keyState: Schema = { type: 'string', enum: ['active', 'next', 'verify-only', 'retired'] };
const signingKey = {
  key_id: { type: 'string', pattern: '^[0-9a-f]{16}$' },
  state: keyState,
  algorithm: { const: 'Ed25519' },
  public_key_pem: string,
  fingerprint: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  created_at: time,
  deactivated_at: nullable(time),
};
/** An X25519 public key: the unpadded base64url of its 32 bytes. */
const machineKey: Schema = { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' };
/** An Ed25519 public key as RFC 8037 writes it in a JWK. */
const jwk: Record<string, Schema> = {
  kty: { const: 'OKP' },
  crv: { const: 'Ed25519' },
  x: { type: 'string', pattern: '^[A-Za-z0-9_-]{43}$' },
  kid: string,
  use: { const: 'sig' },
  alg: { const: 'EdDSA' },
};
const keyChange = object({ key_id: string, before: nullable(keyState), backup: nullable(keyState), after: nullable(keyState) });

const customer = {
  id: uuid,
  name: string,
  active: boolean,
  email: nullable(string),
  created_at: time,
  updated_at: time,
};

const license = {
  id: uuid,
  key: { type: 'string', description: 'The full license key: only in answers to a token with `licenses` (or `admin`).' },
  key_prefix: string,
  customer_id: uuid,
  customer_name: string,
  customer_active: boolean,
  type: { type: 'string', enum: ['time_based', 'usage_based', 'hybrid'] },
  active: boolean,
  status: {
    type: 'string',
    enum: ['active', 'expiring', 'expired', 'suspended', 'pending'],
    description: 'At the time of the request, the first that holds: `suspended` (the license or its customer is deactivated), `expired` (valid_until has passed), `pending` (valid_from is still to come), `expiring` (ends within 7 days), `active`.',
  },
  valid_from: time,
  valid_until: time,
  has_decryption_key: boolean,
  max_machines: nullable({ type: 'integer', minimum: 1 }),
  floating: boolean,
  lease_hours: { type: 'integer', minimum: 1, maximum: 720 },
  machines_in_use: { type: 'integer', minimum: 0 },
  metadata: { type: 'object', additionalProperties: string },
  binding: { type: 'string', enum: ['hardware-id', 'machine-key'], description: 'How offline files seal the decryption key: `hardware-id` (version 1; the file alone opens it) or `machine-key` (version 2, HPKE to the machine key of its activation request; only that machine opens it). See offline-license-format.md.' },
  entitlements: array(object({ code: string, name: string, usage_limit: nullable(integer), used: integer, remaining: nullable(integer) })),
  created_at: time,
  updated_at: time,
};

const backup = {
  id: string,
  backup_id: { type: 'string', deprecated: true, description: 'The same value as `id`, kept for clients written before `id`.' },
  created_at: time,
  trigger: { type: 'string', enum: ['manual', 'scheduled', 'pre-restore'] },
  engine: { type: 'string', enum: ['sqlite', 'postgres'] },
  schema_version: integer,
  encrypted: boolean,
  tool_version: string,
  file: string,
  size: integer,
  sha256: { type: 'string', pattern: '^[0-9a-f]{64}$' },
  verified_at: time,
  signing_keys: array(object({ key_id: string, state: keyState, created_at: time })),
};

const adminToken = {
  id: uuid,
  name: string,
  scopes: { ...array({ type: 'string', enum: [...SCOPES] }), minItems: 1 },
  expires_at: nullable(time),
  prefix: { type: 'string', pattern: '^lsat_', description: "The secret's first characters, to recognise it by; never enough to use it." },
  created_by: { type: 'string', description: 'The actor that made it: `token:<name>`, `config:admin_token`, `cli:<user>`, or `serve` for the bootstrap token.' },
  created_at: time,
  last_used_at: { ...nullable(time), description: 'Kept to the minute.' },
  revoked_at: nullable(time),
  warnings: { ...array(string), description: 'About its name, in a store made before names were checked: names that differ only by case, invisible characters. Usually empty.' },
};

const grant = object({ code: string, usage_limit: nullable(integer) }, ['usage_limit']);

const searchGroup = (item: Schema): Schema => object({ items: array(item), more: boolean });
const matched = (...ways: string[]): Schema => ({ type: 'string', enum: ways, description: 'What the query matched.' });
const bulkTarget: Schema = { type: 'string', enum: ['licenses', 'machines'] };
const bulkAction: Schema = { type: 'string', enum: ['extend', 'suspend', 'reinstate', 'deactivate', 'reactivate'], description: 'On licenses: `extend`, `suspend`, `reinstate`; on machines: `deactivate`, `reactivate`.' };
const bulkFilter: Schema = {
  type: 'object',
  additionalProperties: string,
  description: "The list's query parameters, as strings (`{\"active\": \"true\"}`): `GET /api/licenses`'s for licenses, `GET /api/machines`'s for machines; no paging. Empty: every row.",
};

export const schemas: Record<string, Schema> = {
  SearchResults: object({
    query: string,
    licenses: searchGroup(object({
      id: uuid, key: string, key_prefix: string, customer_id: uuid, customer_name: string, type: string, valid_until: time, active: boolean,
      matched: matched('id', 'key', 'key_prefix'),
    }, ['key'])),
    customers: searchGroup(object({ id: uuid, name: string, email: nullable(string), active: boolean, matched: matched('id', 'name', 'email') })),
    machines: searchGroup(object({ id: uuid, hardware_id: string, name: nullable(string), license_id: uuid, active: boolean, matched: matched('id', 'hardware_id', 'name') })),
    entitlements: searchGroup(object({ id: uuid, code: string, name: string, matched: matched('id', 'code') })),
    admin_tokens: searchGroup(object({ id: uuid, name: string, scopes: array(string), expires_at: nullable(time), revoked: boolean, matched: matched('id') })),
    audit_entries: searchGroup(object({ id: integer, occurred_at: time, actor: string, action: string, entity_type: string, entity_id: nullable(string), matched: matched('id', 'entity_id') })),
    notification_deliveries: searchGroup(object({ id: uuid, event: string, channel: string, status: string, created_at: time, matched: matched('id') })),
  }, ['admin_tokens']),
  Error: object(
    {
      error: object({
        code: { type: 'string', pattern: '^[A-Z][A-Z0-9_]*$', description: 'A stable code from the error table (docs/errors.md).' },
        message: string,
        request_id: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$', description: 'The X-Request-Id of the answer, to find the request in the log.' },
      }),
    },
    [],
    'The one error body of the API.',
  ),
  Status: object({ status: { type: 'string', enum: ['ok', 'ready'] } }),
  Whoami: object({ actor: string, scopes: array({ type: 'string', enum: [...SCOPES] }), routes: { ...array({ type: 'string', pattern: '^(GET|POST|PATCH|PUT|DELETE) /' }), description: 'Every admin route this token may call, as `METHOD /path/{param}`, from the route table.' } }),
  AdminToken: object(adminToken, [], 'An admin token, never its secret.'),
  IssuedAdminToken: object(
    { ...adminToken, token: { type: 'string', pattern: '^lsat_[A-Za-z0-9_-]{43}$', description: 'The secret, in this answer only: it is stored as its SHA-256.' } },
    [],
    'A new admin token with its secret.',
  ),
  ActiveSigningKey: object({ public_key_pem: string, key_id: signingKey.key_id }),
  SigningKey: object(signingKey),
  SigningKeySet: object({ active_key_id: nullable(signingKey.key_id), keys: array(ref('SigningKey')) }),
  Jwk: { type: 'object', properties: jwk, required: Object.keys(jwk) },
  JwkSet: object({ keys: array(ref('Jwk')) }),
  Endorsement: object(
    {
      signer_key_id: signingKey.key_id,
      signature: { type: 'string', pattern: '^[A-Za-z0-9_-]{86}$', description: 'Ed25519 signature (base64url, no padding) of the endorsement statement (docs/public-keys.md).' },
    },
    [],
    'A key that verifies (signer_key_id) vouches for this key.',
  ),
  PublicJwk: object({ ...jwk, endorsements: array(ref('Endorsement')) }),
  PublicJwkSet: object({ keys: array(ref('PublicJwk')) }),
  PublicSigningKey: object({
    key_id: signingKey.key_id,
    state: { type: 'string', enum: ['active', 'next', 'verify-only'] },
    algorithm: { const: 'Ed25519' },
    public_key_pem: string,
    fingerprint: signingKey.fingerprint,
    created_at: time,
    endorsements: array(ref('Endorsement')),
  }),
  PublicSigningKeySet: object({ active_key_id: nullable(signingKey.key_id), keys: array(ref('PublicSigningKey')) }),
  Rotation: object({ previous: ref('SigningKey'), active: ref('SigningKey') }),
  PreparedKey: object({ next: ref('SigningKey'), created: boolean }),
  RetiredKey: object({ ...signingKey, retired_at: time, forced: boolean, signed_valid_until: nullable(time), erase_warning: nullable(string) }),
  Checkout: object({ license_file: string, filename: string, valid_until: time }),
  Customer: object(customer),
  CustomerSummary: object({
    ...customer,
    licenses: integer,
    active_licenses: integer,
    machines_in_use: integer,
    entitlements: array(object({ code: string, used: integer, usage_limit: nullable(integer) })),
  }),
  Entitlement: object({ id: uuid, code: string, name: string, created_at: time }),
  ListCount: object({ count: { type: 'integer', minimum: 0 }, exact: { type: 'boolean', description: 'false: there are at least `count` (the bound), maybe more.' } }),
  Attention: object({
    at: time,
    counts: object(Object.fromEntries([
      'licenses_expiring_7d', 'licenses_expiring_30d', 'licenses_expired_7d', 'licenses_at_machine_limit', 'licenses_usage_high',
      'deliveries_failed', 'deliveries_retrying', 'backup_targets_failing',
    ].map((name) => [name, object({
      count: { type: 'integer', minimum: 0 },
      exact: boolean,
      query: { type: 'string', pattern: '^/api/' },
      as_of: { ...time, description: "When it was counted: the request's time, or for a count that reads every license with a machine limit (`licenses_at_machine_limit`), the start of the daemon's background read of the store's figures, the read /metrics shows, while that read is fresh." },
    })]))),
    backups: object({ stale: boolean, newest_success_at: nullable(time), max_age_seconds: { type: 'number' }, query: string }),
    signing_key: { oneOf: [object({ key_id: string, created_at: time, age_seconds: { type: 'integer', minimum: 0 }, query: string }), { type: 'null' }] },
  }),
  License: object(license, ['key', 'machines_in_use']),
  LicenseView: object(
    { ...license, recent_checkouts: array(object({ checked_out_at: time, actor: string, hardware_id: nullable(string), valid_until: time, voided: boolean })) },
    ['key'],
  ),
  LicenseChange: object({
    license: ref('License'),
    changes: { type: 'object', additionalProperties: object({ before: {}, after: {} }) },
    warnings: array(string),
  }),
  UsageRecord: object({
    id: uuid,
    entitlement_code: string,
    quantity: integer,
    remaining: nullable(integer),
    hardware_id: string,
    idempotency_key: string,
    occurred_at: time,
    recorded_at: time,
  }),
  Machine: object({
    id: uuid,
    license_id: uuid,
    hardware_id: string,
    name: nullable(string),
    client_version: nullable(string),
    active: boolean,
    holds_seat: boolean,
    first_seen: time,
    last_seen: time,
    lease_expires_at: nullable(time),
    offline_until: nullable(time),
    deactivated_at: nullable(time),
    machine_key: { ...nullable(machineKey), description: 'The X25519 public key of the activation request this machine was last checked out from (unpadded base64url); online answers of a `machine-key` license seal the decryption key to it.' },
  }),
  MachineChange: object({ machine: ref('Machine'), warnings: array(string) }),
  BulkJob: object(
    {
      id: uuid,
      target: bulkTarget,
      action: bulkAction,
      by: { ...nullable(string), description: 'The span of `extend`; null for the other actions.' },
      filter: bulkFilter,
      state: { type: 'string', enum: ['queued', 'running', 'done', 'failed', 'cancelled'] },
      total: { ...integer, description: 'The rows the filter selected when the job was made.' },
      done: { ...integer, description: 'Rows handled so far: `changed` + `unchanged` + `failed`.' },
      changed: integer,
      unchanged: { ...integer, description: 'Already as the action leaves them (a suspended license to suspend): nothing written.' },
      failed: integer,
      errors: { ...array(ref('BulkRowError')), maxItems: 1000, description: 'The first 1000 rows refused, in the order reached; `failed` counts them all.' },
      error: { ...nullable(string), description: 'Why the job itself failed.' },
      resumed: { ...integer, description: 'Times a daemon took the job up again after the one running it stopped or died.' },
      created_by: string,
      created_at: time,
      started_at: nullable(time),
      finished_at: nullable(time),
    },
    [],
    'A bulk job: one action over the rows of a list filter, run by a daemon in batches.',
  ),
  BulkRowError: object({ id: uuid, code: { type: 'string', pattern: '^[A-Z][A-Z0-9_]*$' }, message: string }),
  BulkPreview: object({
    target: bulkTarget,
    action: bulkAction,
    by: nullable(string),
    filter: bulkFilter,
    count: { ...integer, description: "The rows the job would act on if made now: the list's count for this filter." },
    first: { ...array({ oneOf: [ref('License'), ref('Machine')] }), maxItems: 5, description: 'The first of them, as the list gives them.' },
  }),
  AuditEntry: object({
    id: integer,
    occurred_at: time,
    actor: string,
    action: string,
    entity_type: string,
    entity_id: nullable(string),
    details: { type: 'object' },
  }),
  Delivery: object({
    id: uuid,
    event_id: uuid,
    event: string,
    channel: { type: 'string', enum: ['webhook', 'email'] },
    target: string,
    status: { type: 'string', enum: ['pending', 'delivered', 'failed'] },
    attempts: integer,
    last_attempt_at: nullable(time),
    last_status: nullable(integer),
    last_error: nullable(string),
    next_attempt_at: nullable(time),
    delivered_at: nullable(time),
    occurred_at: time,
    created_at: time,
    data: { type: 'object' },
  }),
  Backup: object(backup, ['signing_keys']),
  NewBackup: object({ ...backup, copies: { const: 'pending' }, warning: string }, ['signing_keys', 'copies', 'warning']),
  BackupList: {
    oneOf: [
      object({
        backups: array(ref('Backup')),
        scheduler: object({
          enabled: boolean,
          schedule: string,
          next_run: nullable(time),
          last_run: {
            oneOf: [
              { type: 'null' },
              object({
                slot: string,
                status: { type: 'string', enum: ['running', 'succeeded', 'failed'] },
                claimed_by: string,
                finished_at: nullable(time),
                backup_id: nullable(string),
                error: nullable(string),
              }),
            ],
          },
        }),
        warnings: array(object({ kind: string, name: string, message: string })),
      }),
      object({ backups: array(ref('Backup')), target: string }),
    ],
  },
  BackupStatus: object({
    places: array(
      object({
        id: string,
        place: string,
        kind: { type: 'string', enum: ['local', 'file', 's3', 'sftp'] },
        location: string,
        newest_backup_id: nullable(string),
        newest_created_at: nullable(time),
        age_seconds: nullable({ type: 'number' }),
        count: integer,
        bytes: integer,
        unreachable: nullable(string),
        unreachable_reason: nullable({ type: 'string', enum: [...TARGET_FAILURES] }),
        last_error: nullable(string),
        last_error_reason: nullable({ type: 'string', enum: [...TARGET_FAILURES, 'unencrypted'] }),
        last_error_at: nullable(time),
        copies: nullable(object({
          pending: integer,
          copying: integer,
          stuck: integer,
          newest: nullable(object({
            backup_id: string,
            state: { type: 'string', enum: ['waiting', 'copying', 'stuck'] },
            attempts: integer,
            next_attempt_at: nullable(time),
          })),
        })),
        stale: nullable(boolean),
      }),
    ),
    stale: boolean,
    replication: { oneOf: [{ type: 'null' }, ref('ReplicationStatus')], description: 'serve\'s continuous replication by Litestream (docs/replication.md); null when backup.replication names no target.' },
    wal_archiving: { oneOf: [{ type: 'null' }, ref('WalArchiving')], description: 'PostgreSQL\'s WAL archiving as pg_stat_archiver reports it (pgBackRest: docs/replication.md); null on SQLite.' },
    drill: { oneOf: [{ type: 'null' }, ref('RestoreDrill')], description: 'The newest restore drill recorded beside the backups (`backup drill`, or serve on backup.drill.schedule); null before the first.' },
  }),
  WalArchiving: object({
    state: { type: 'string', enum: ['ok', 'failing', 'stale', 'off'], description: '`failing`: the newest attempt to archive failed (PostgreSQL retries); `stale`: completed WAL files wait and nothing was archived for max(300 s, 2 archive_timeout); `off`: archive_mode is off.' },
    problem: nullable({ type: 'string', description: 'What is wrong, for a person; null when ok.' }),
    warnings: array(string),
    archive_mode: string,
    archive_timeout_seconds: { type: 'integer', minimum: 0 },
    archived_count: integer,
    last_archived_wal: nullable(string),
    last_archived_at: nullable(time),
    last_archived_age_seconds: nullable({ type: 'integer', minimum: 0 }),
    failed_count: integer,
    last_failed_wal: nullable(string),
    last_failed_at: nullable(time),
    current_wal: nullable({ type: 'string', description: 'The WAL file being written; null on a standby.' }),
    waiting_segments: nullable({ type: 'integer', minimum: 0, description: 'Completed WAL files not archived yet.' }),
    as_of: { ...time, description: 'The database server\'s clock when read; ages are measured against it.' },
  }),
  RestoreDrill: object({
    started_at: time,
    finished_at: time,
    trigger: { type: 'string', enum: ['manual', 'scheduled'] },
    ok: boolean,
    parts: array(object({
      source: { type: 'string', enum: ['backup', 'replica'] },
      name: { type: 'string', description: 'The backup\'s id, or the replicated target\'s name.' },
      ok: boolean,
      state_at: nullable({ ...time, description: 'When the restored state is from: the backup\'s creation, or the replica\'s newest WAL segment.' }),
      complete_through: nullable({ ...time, description: 'Every live row made at or before this was required to be in the restored store.' }),
      seconds: { type: 'number', minimum: 0 },
      checks: array(object({ check: string, detail: string })),
      error: { oneOf: [{ type: 'null' }, object({ code: string, message: string })] },
    })),
  }),
  ReplicationStatus: object({
    state: { type: 'string', enum: ['replicating', 'restarting', 'paused', 'stopped'], description: '`restarting`: Litestream died and serve starts it again after a backoff; `paused`: a restore is swapping the database.' },
    litestream_version: string,
    pid: nullable(integer),
    started_at: nullable(time),
    restarts: { type: 'integer', minimum: 0, description: 'Times serve started Litestream again after it died.' },
    local_position: nullable({ type: 'string', description: 'How far Litestream has copied the WAL into its shadow WAL: `generation/index:offset` (16 hex digits, 8 hex digits, bytes).' }),
    local_synced_at: nullable({ ...time, description: 'When Litestream last copied the WAL into its shadow WAL (about every second); null after a start until it has.' }),
    replicas: array(object({
      target: string,
      position: nullable({ type: 'string', description: 'How far the replica holds the WAL, as local_position.' }),
      lag_seconds: nullable({ type: 'number', minimum: 0, description: 'How long the replica has been behind the database; 0 when it holds everything Litestream copied; null until known.' }),
      caught_up_at: nullable(time),
      errors: integer,
      last_error: { oneOf: [{ type: 'null' }, object({ at: time, message: string })] },
    })),
  }),
  BackupCopies: object({
    id: string,
    copies: array(
      object(
        {
          target: string,
          backup_id: string,
          result: { type: 'string', enum: ['copied', 'present', 'failed', 'refused-unencrypted', 'busy'] },
          reason: string,
          error: string,
          bytes: integer,
          seconds: { type: 'number' },
          pruned: array(string),
        },
        ['reason', 'error', 'bytes', 'seconds', 'pruned'],
      ),
    ),
    failed: integer,
  }),
  BackupValidation: object(
    {
      valid: { const: true },
      id: string,
      backup_id: { type: 'string', deprecated: true },
      created_at: time,
      engine: string,
      schema_version: integer,
      encrypted: boolean,
      checks: array(object({ check: string, detail: string })),
      target: string,
    },
    ['target'],
  ),
  RestorePreview: object({
    backup_id: string,
    created_at: time,
    dry_run: { const: true },
    signing_keys: { oneOf: [{ type: 'null' }, object({ another_server: boolean, changes: array(keyChange) })] },
  }),
  RestoreReport: object({
    backup_id: string,
    engine: string,
    schema_version: integer,
    migrated_to: integer,
    pre_restore_backup_id: nullable(string),
    replaced_config: nullable(string),
    revocations: object({
      keep: boolean,
      admin_tokens: array(object({ id: string, name: string, prefix: string, revoked_at: time })),
      licenses: array(object({ id: uuid, key_prefix: string })),
      customers: array(object({ id: uuid, name: string })),
      machines: array(object({ id: uuid, license_id: uuid, hardware_id: string })),
    }),
    signing_keys: object({ another_server: boolean, changes: array(keyChange), erase_warning: nullable(string) }),
    signing_key_warning: nullable(string),
    moved: { oneOf: [{ type: 'null' }, object({ from: string, to: string, rows: { type: 'object', additionalProperties: integer } })] },
  }),
  Validation: {
    oneOf: [
      object(
        {
          valid: { const: true },
          license_id: uuid,
          license_key_prefix: string,
          license_type: string,
          valid_from: time,
          valid_until: time,
          entitlements: array(object({ code: string, name: string, usage_limit: nullable(integer) })),
          encrypted_key: { type: 'string', description: 'The decryption key, sealed as in a `.lic` file: for the hardware ID (docs/offline-license-format.md section 7), or, with `machine_key`, to that machine key (section 14). Absent when the license has no decryption key, and for a `machine-key` license whose machine was never checked out from an activation request.' },
          machine_key: { ...machineKey, description: 'Licenses bound with `machine-key`: the machine key recorded from the machine\'s activation request, which `encrypted_key` is sealed to with HPKE.' },
          grace_token: string,
          grace_expires_at: time,
          machine_id: uuid,
          lease_expires_at: time,
          server_time: time,
        },
        ['encrypted_key', 'machine_key', 'lease_expires_at'],
        'A valid license.',
      ),
      object(
        {
          valid: { const: false },
          reason: {
            type: 'string',
            enum: ['LICENSE_NOT_FOUND', 'LICENSE_INACTIVE', 'CUSTOMER_INACTIVE', 'LICENSE_EXPIRED', 'LICENSE_NOT_YET_VALID', 'MACHINE_LIMIT_EXCEEDED', 'MACHINE_DEACTIVATED'],
          },
          message: string,
          server_time: time,
        },
        [],
        'An authoritative "no": the client must not fall back to its offline tiers.',
      ),
    ],
  },
  UsageAnswer: object({
    replayed: boolean,
    entitlement_code: string,
    quantity: integer,
    used: integer,
    usage_limit: nullable(integer),
    remaining: nullable(integer),
  }),
  ReleaseAnswer: object({ released: boolean, seat_free_at: nullable(time), message: string, server_time: time }),
  EntitlementGrant: grant,
  ImportReport: object(
    {
      kind: { type: 'string', enum: ['customers', 'licenses'] },
      dry_run: boolean,
      rows: { type: 'integer', minimum: 0, description: 'Data rows read (blank rows not counted).' },
      valid: { type: 'boolean', description: 'Every row is valid.' },
      imported: { type: 'integer', minimum: 0, description: 'Rows created: 0 for a dry run.' },
      errors: array(object({
        line: { type: 'integer', minimum: 1, description: 'The physical line the row starts on (a quoted field may span lines).' },
        column: { ...nullable(string), description: 'The column at fault; null for the row as a whole.' },
        code: { type: 'string', pattern: '^[A-Z][A-Z0-9_]*$', description: 'A code of the error table, as the create would have answered.' },
        message: string,
      })),
      created: array(object({ line: { type: 'integer', minimum: 1 }, id: uuid })),
    },
    [],
    'What a CSV import did, or with a dry run what it would do (docs/http-api.md, "CSV export and import").',
  ),
  ReplicaMoment: object({
    target: string,
    to_time: { ...time, description: 'The moment asked for.' },
    generation: { type: 'string', pattern: '^[0-9a-f]{16}$' },
    snapshot: object({ index: integer, created_at: time }),
    state_at: { ...time, description: 'When the newest WAL segment replayed was written: the state is the database\'s as of then (second precision).' },
    available: object({ from: time, to: time }, [], 'The oldest and newest moments the replica can restore to now.'),
  }),
  ConfigurationSource: {
    description: 'Where the restored config.yaml comes from: the backup archive nearest the moment, or this host\'s when backup.path holds none that can be read. Notification settings are tables of the database: the replica\'s.',
    oneOf: [
      object({ from: { const: 'backup' }, backup_id: string, created_at: time }),
      object({ from: { const: 'this host' }, reason: string }),
    ],
  },
};

/** A restore's answer with what a point-in-time restore adds: the replica's moment and the configuration's source. */
function withReplica(name: 'RestoreReport' | 'RestorePreview'): Schema {
  const base = schemas[name]!;
  return {
    ...base,
    properties: { ...(base.properties as Record<string, Schema>), replica: { $ref: '#/components/schemas/ReplicaMoment' }, configuration: { $ref: '#/components/schemas/ConfigurationSource' } },
    required: [...(base.required as string[]), 'replica', 'configuration'],
  };
}
schemas.ReplicaRestoreReport = withReplica('RestoreReport');
schemas.ReplicaRestorePreview = withReplica('RestorePreview');

/** Request bodies. Unknown members are refused (INVALID_INPUT), so these are closed too. */
export const requests = {
  checkout: object({
    ttl_days: { type: 'integer', minimum: 1, maximum: 365 },
    hardware_id: nullable(string),
    request: {
      type: 'string',
      description: 'An activation request file\'s text (docs/offline-license-format.md section 12): the file is bound to its hardware ID and carries its nonce (version 2); for a license bound with `machine-key`, its decryption key is sealed to the request\'s `machine_key` (section 14), and such a license is checked out only with a request. Not together with `hardware_id`.',
    },
  }, ['hardware_id', 'request']),
  newCustomer: object({ name: string, email: nullable(string) }, ['email']),
  customerUpdate: object({ name: string, email: nullable(string) }, ['name', 'email']),
  empty: object({}),
  newEntitlement: object({ code: { type: 'string', pattern: '^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$' }, name: string }),
  newLicense: object(
    {
      customer_id: uuid,
      type: { type: 'string', enum: ['time_based', 'usage_based', 'hybrid'] },
      valid_until: { type: 'string', description: '`YYYY-MM-DD` (through that day, UTC) or RFC 3339.' },
      valid_from: string,
      entitlements: array(ref('EntitlementGrant')),
      with_decryption_key: boolean,
      max_machines: nullable({ type: 'integer', minimum: 1 }),
      floating: boolean,
      lease_hours: { type: 'integer', minimum: 1, maximum: 720 },
      metadata: { type: 'object', additionalProperties: { type: 'string', maxLength: 1024 }, maxProperties: 64 },
      binding: { type: 'string', enum: ['hardware-id', 'machine-key'], description: 'How offline files seal the decryption key: `hardware-id` (version 1; the file alone opens it) or `machine-key` (version 2, HPKE to the machine key of its activation request; only that machine opens it). See offline-license-format.md.' },
    },
    ['valid_from', 'entitlements', 'with_decryption_key', 'max_machines', 'floating', 'lease_hours', 'metadata', 'binding'],
  ),
  licenseUpdate: object(
    {
      valid_from: string,
      valid_until: string,
      max_machines: nullable({ type: 'integer', minimum: 1 }),
      floating: boolean,
      lease_hours: { type: 'integer', minimum: 1, maximum: 720 },
      add_entitlements: array(ref('EntitlementGrant')),
      remove_entitlements: array(string),
      set_limits: array(ref('EntitlementGrant')),
      metadata: { type: 'object', additionalProperties: string, description: 'A value of "" removes the key.' },
      binding: { type: 'string', enum: ['hardware-id', 'machine-key'], description: 'How offline files seal the decryption key: `hardware-id` (version 1; the file alone opens it) or `machine-key` (version 2, HPKE to the machine key of its activation request; only that machine opens it). See offline-license-format.md.' },
    },
    ['valid_from', 'valid_until', 'max_machines', 'floating', 'lease_hours', 'add_entitlements', 'remove_entitlements', 'set_limits', 'metadata', 'binding'],
  ),
  renew: { oneOf: [object({ by: { type: 'string', pattern: '^[0-9]+[hdwy]$' } }), object({ until: string })] },
  release: object({ lost_file: { const: true }, reason: { type: 'string', minLength: 1, maxLength: 500 } }, ['reason']),
  newToken: object({
    name: { type: 'string', minLength: 1, maxLength: 100, description: 'Unique, never reused, compared without case (NFKC); recorded as the actor `token:<name>`.' },
    scopes: { ...array({ type: 'string', enum: [...SCOPES] }), minItems: 1 },
    expires_in: { type: 'string', pattern: '^[0-9]+[hdwy]$', description: 'Expire after this long, as `token create --expires-in`: `90d`, `12w`, `1y`, `36h` (at most 100 years). Left out: never.' },
  }, ['expires_in']),
  bulk: object(
    {
      target: bulkTarget,
      action: bulkAction,
      by: { type: 'string', pattern: '^[0-9]+[hdwy]$', description: 'With `extend` only, and required there: the span added to each license, as `POST /api/licenses/{id}/renew` takes it.' },
      filter: bulkFilter,
      dry_run: { type: 'boolean', description: 'Only count the rows and show the first few; nothing is made or changed.' },
    },
    ['by', 'filter', 'dry_run'],
  ),
  revokeToken: object({ allow_self: { type: 'boolean', description: 'Revoke the token this request is made with too (otherwise `422 TOKEN_SELF_REVOKE`).' } }, ['allow_self']),
  rotate: object({ prepare: boolean }, ['prepare']),
  retire: object({ force: boolean }, ['force']),
  validateBackup: object({ target: string }, ['target']),
  restore: object({ confirm: string, keep_revocations: boolean, force: boolean, dry_run: boolean, target: string, replace_keys: boolean }, ['confirm', 'keep_revocations', 'force', 'dry_run', 'target', 'replace_keys']),
  restoreReplica: object(
    {
      to_time: { ...time, description: 'The moment to restore the replica to.' },
      confirm: { type: 'string', description: 'The same text as `to_time`; required unless `dry_run`.' },
      keep_revocations: boolean,
      force: boolean,
      dry_run: boolean,
      replace_keys: boolean,
    },
    ['confirm', 'keep_revocations', 'force', 'dry_run', 'replace_keys'],
  ),
  copy: object({ to: { ...array(string), minItems: 1 } }, ['to']),
  validate: object(
    {
      license_key: string,
      hardware_id: string,
      version: string,
      machine_name: { type: 'string', minLength: 1, maxLength: 200 },
      previous_hardware_id: {
        type: 'string',
        description: 'The `hw1-` ID this machine used before it derived its `hw2-` `hardware_id`: the machine recorded with it moves to the new ID (same seat, audited as `machine.migrated`). Ignored unless it begins with `hw1-`, `hardware_id` begins with `hw2-`, the license has no machine with `hardware_id` yet and an active machine with this ID.',
      },
    },
    ['machine_name', 'previous_hardware_id'],
  ),
  usage: object({
    license_key: string,
    hardware_id: string,
    entitlement_code: string,
    quantity: { type: 'integer', minimum: 1, maximum: 1_000_000_000 },
    occurred_at: time,
    idempotency_key: { type: 'string', minLength: 1, maxLength: 128 },
  }),
  releaseSeat: object({ license_key: string, hardware_id: string }),
};
