/**
 * What each column holds, independent of the engine: the migrations write one logical type
 * as two column types (migrations.ts, `T`), and moving rows from one engine to the other
 * needs the logical one back (an INTEGER in SQLite may be a boolean or a count, a TEXT an
 * id, a timestamp or JSON). A column keeps its kind across schema versions.
 * test/lib/storage/column-kinds.test.ts checks this table against both engines' catalogs
 * after every migration, so a new column cannot be forgotten here.
 */
export type ColumnKind = 'uuid' | 'text' | 'timestamp' | 'boolean' | 'bytes' | 'integer' | 'json';

const u = 'uuid', t = 'text', ts = 'timestamp', b = 'boolean', by = 'bytes', i = 'integer', j = 'json';

export const COLUMN_KINDS: Readonly<Record<string, Readonly<Record<string, ColumnKind>>>> = {
  schema_migrations: { version: i, name: t, applied_at: ts },
  customers: { id: u, name: t, active: b, created_at: ts, updated_at: ts, email: t },
  entitlements: { id: u, code: t, name: t, created_at: ts },
  licenses: {
    id: u, license_key: t, customer_id: u, type: t, active: b, valid_from: ts, valid_until: ts, decryption_key: by,
    created_at: ts, updated_at: ts, max_machines: i, floating: b, lease_hours: i, metadata: j, binding: t,
  },
  license_entitlements: { license_id: u, entitlement_id: u, usage_limit: i, used: i },
  signing_keys: {
    id: u, key_id: t, algorithm: t, public_key: by, private_key: by, is_current: b, created_at: ts, sealed_with: t,
    key_id_in_files: b, deactivated_at: ts, retired_at: ts,
  },
  admin_tokens: {
    id: u, name: t, token_hash: t, token_prefix: t, created_by: t, created_at: ts, last_used_at: ts, revoked_at: ts,
    scopes: t, expires_at: ts,
  },
  audit_log: { id: i, occurred_at: ts, actor: t, action: t, entity_type: t, entity_id: t, details: j },
  notification_email_templates: { event: t, subject: t, body: t, updated_at: ts },
  notification_webhooks: { id: u, name: t, url: t, secret: t, enabled: b, created_at: ts, updated_at: ts },
  notification_alert_rules: { id: u, event: t, webhook_id: u, email_to: t, enabled: b, created_at: ts },
  usage_records: {
    id: u, license_id: u, entitlement_id: u, idempotency_key: t, hardware_id: t, quantity: i, remaining: i,
    occurred_at: ts, recorded_at: ts,
  },
  backup_runs: { slot: ts, claimed_by: t, claimed_at: ts, finished_at: ts, status: t, backup_id: t, error: t },
  machines: {
    id: u, license_id: u, hardware_id: t, name: t, client_version: t, active: b, first_seen: ts, last_seen: ts,
    lease_expires_at: ts, offline_until: ts, deactivated_at: ts, machine_key: t,
  },
  notification_deliveries: {
    id: u, event_id: u, event: t, occurred_at: ts, data: t, channel: t, target: t, status: t, attempts: i,
    next_attempt_at: ts, retry_from: ts, claimed_by: t, claimed_until: ts, last_attempt_at: ts, last_status: i,
    last_error: t, delivered_at: ts, created_at: ts,
  },
  notification_marks: { key: t, at: ts, count: i },
  backup_copies: {
    backup_id: t, target: t, status: t, attempts: i, next_attempt_at: ts, claimed_by: t, claimed_until: ts, last_attempt_at: ts,
    last_error: t, copied_at: ts, created_at: ts,
  },
  signing_key_endorsements: { key_id: t, signer_key_id: t, signature: by, created_at: ts },
  activation_requests: { nonce: t, license_id: u, hardware_id: t, created_at: ts, used_at: ts, request_digest: t },
  bulk_jobs: {
    id: u, target: t, action: t, span: t, filters: j, state: t, total: i, bound: j, position: j, changed: i, unchanged: i,
    failed: i, errors: j, error: t, resumed: i, created_by: t, created_at: ts, started_at: ts, finished_at: ts, claimed_by: t,
    claimed_until: ts,
  },
};

/** The kind of `table.column`, or undefined for a column this release does not know. */
export function columnKind(table: string, column: string): ColumnKind | undefined {
  return Object.hasOwn(COLUMN_KINDS, table) && Object.hasOwn(COLUMN_KINDS[table]!, column) ? COLUMN_KINDS[table]![column] : undefined;
}
