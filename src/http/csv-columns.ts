/**
 * The columns of each list's CSV export: the members of the list's rows as the JSON API gives
 * them, in the order of their schema in docs/openapi.json (test/http/csv-columns.test.ts holds
 * the two together). Declared, not read off the first row, so that the header is the same
 * for every export of a list, an empty one too.
 */
export const CSV_COLUMNS = {
  customers: ['id', 'name', 'active', 'email', 'created_at', 'updated_at'],
  entitlements: ['id', 'code', 'name', 'created_at'],
  licenses: [
    'id', 'key', 'key_prefix', 'customer_id', 'customer_name', 'customer_active', 'type', 'active', 'status', 'valid_from', 'valid_until', 'has_decryption_key',
    'max_machines', 'floating', 'lease_hours', 'machines_in_use', 'metadata', 'binding', 'entitlements', 'created_at', 'updated_at',
  ],
  'license-usage': ['id', 'entitlement_code', 'quantity', 'remaining', 'hardware_id', 'idempotency_key', 'occurred_at', 'recorded_at'],
  machines: ['id', 'license_id', 'hardware_id', 'name', 'client_version', 'active', 'holds_seat', 'first_seen', 'last_seen', 'lease_expires_at', 'offline_until', 'deactivated_at', 'machine_key'],
  audit: ['id', 'occurred_at', 'actor', 'action', 'entity_type', 'entity_id', 'details'],
  'notification-deliveries': [
    'id', 'event_id', 'event', 'channel', 'target', 'status', 'attempts', 'last_attempt_at', 'last_status', 'last_error', 'next_attempt_at', 'delivered_at', 'occurred_at', 'created_at', 'data',
  ],
  tokens: ['id', 'name', 'scopes', 'expires_at', 'prefix', 'created_by', 'created_at', 'last_used_at', 'revoked_at', 'warnings'],
  backups: ['id', 'backup_id', 'created_at', 'trigger', 'engine', 'schema_version', 'encrypted', 'tool_version', 'file', 'size', 'sha256', 'verified_at', 'signing_keys'],
} as const satisfies Record<string, readonly string[]>;

/** A list that exports as CSV; also the stem of its file name. */
export type CsvList = keyof typeof CSV_COLUMNS;
