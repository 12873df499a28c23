// The shapes of the API's answers that the console reads (docs/http-api.md has them whole).

export interface LicenseEntitlement {
  readonly code: string;
  readonly name: string;
  readonly usage_limit: number | null;
  readonly used: number;
  readonly remaining: number | null;
}

export interface License {
  readonly id: string;
  /** Absent or cut short for a token without the licenses scope. */
  readonly key?: string;
  readonly key_prefix: string;
  readonly customer_id: string;
  readonly customer_name: string;
  readonly customer_active: boolean;
  readonly type: string;
  readonly active: boolean;
  readonly status?: string;
  readonly valid_from: string;
  readonly valid_until: string;
  readonly has_decryption_key: boolean;
  readonly max_machines: number | null;
  readonly floating: boolean;
  readonly lease_hours: number;
  readonly machines_in_use?: number;
  readonly metadata: Readonly<Record<string, string>>;
  readonly binding: string;
  readonly entitlements: readonly LicenseEntitlement[];
  readonly created_at: string;
  readonly updated_at: string;
}

export interface LicenseView extends License {
  readonly recent_checkouts: ReadonlyArray<{ checked_out_at: string; actor: string; hardware_id: string | null; valid_until: string; voided: boolean }>;
}

export interface Customer {
  readonly id: string;
  readonly name: string;
  readonly email: string | null;
  readonly active: boolean;
  readonly created_at: string;
  readonly updated_at: string;
}

export interface Machine {
  readonly id: string;
  readonly license_id: string;
  readonly hardware_id: string;
  readonly name: string | null;
  readonly client_version?: string | null;
  readonly active: boolean;
  readonly holds_seat: boolean;
  readonly first_seen: string;
  readonly last_seen: string;
  readonly lease_expires_at?: string | null;
  readonly offline_until: string | null;
}

export interface AuditEntry {
  readonly id: number;
  readonly occurred_at: string;
  readonly actor: string;
  readonly action: string;
  readonly entity_type: string;
  readonly entity_id: string | null;
  readonly details: Record<string, unknown>;
}

export interface Entitlement {
  readonly id: string;
  readonly code: string;
  readonly name: string;
  readonly created_at: string;
}

export interface Delivery {
  readonly id: string;
  readonly event: string;
  readonly channel: string;
  readonly target: string;
  readonly status: string;
  readonly attempts: number;
  readonly last_status: number | null;
  readonly last_error: string | null;
  readonly next_attempt_at?: string | null;
  readonly created_at: string;
}
