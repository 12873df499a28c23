// Every action the console offers, with the admin route it calls: the page shows an action
// only when GET /api/whoami lists its route for the signed-in token, and
// test/http/console-scopes.test.ts checks each page against each scope from this table.
// No DOM here: the tests import it.

export interface Action {
  /** The button's (or link's) accessible name. */
  readonly label: string;
  /** `METHOD /path/{param}`, as the route table and the OpenAPI document write it. */
  readonly route: string;
  /** The console pages that offer it, by their kind (see PAGES). */
  readonly pages: readonly Page[];
}

export type Page = 'licenses' | 'license' | 'customers' | 'customer' | 'machines' | 'machine' | 'backups' | 'deliveries' | 'entitlements' | 'tokens';

export const ACTIONS = {
  newLicense: { label: 'New license', route: 'POST /api/licenses', pages: ['licenses', 'customer'] },
  extendLicense: { label: 'Extend', route: 'POST /api/licenses/{id}/renew', pages: ['license'] },
  editLicense: { label: 'Edit', route: 'PATCH /api/licenses/{id}', pages: ['license'] },
  checkOut: { label: 'Check out .lic', route: 'POST /api/licenses/{id}/checkout', pages: ['license'] },
  suspendLicense: { label: 'Suspend', route: 'POST /api/licenses/{id}/deactivate', pages: ['license'] },
  reinstateLicense: { label: 'Reinstate', route: 'POST /api/licenses/{id}/activate', pages: [] },
  exportLicenses: { label: 'Export CSV', route: 'GET /api/licenses', pages: ['licenses'] },
  newCustomer: { label: 'New customer', route: 'POST /api/customers', pages: ['customers'] },
  editCustomer: { label: 'Edit', route: 'PATCH /api/customers/{id}', pages: ['customer'] },
  deactivateCustomer: { label: 'Deactivate', route: 'POST /api/customers/{id}/deactivate', pages: ['customer'] },
  activateCustomer: { label: 'Activate', route: 'POST /api/customers/{id}/activate', pages: [] },
  freeSeat: { label: 'Free seat', route: 'POST /api/machines/{id}/deactivate', pages: ['license', 'machines', 'machine'] },
  deactivateMachine: { label: 'Deactivate', route: 'POST /api/machines/{id}/deactivate', pages: ['license', 'machines', 'machine'] },
  activateMachine: { label: 'Activate', route: 'POST /api/machines/{id}/activate', pages: [] },
  releaseSeat: { label: 'Release seat', route: 'POST /api/machines/{id}/release', pages: [] },
  importLicenses: { label: 'Import CSV…', route: 'POST /api/licenses/import', pages: ['licenses'] },
  importCustomers: { label: 'Import CSV…', route: 'POST /api/customers/import', pages: ['customers'] },
  bulkLicenses: { label: 'Bulk action…', route: 'POST /api/bulk', pages: ['licenses', 'machines'] },
  createBackup: { label: 'Create backup', route: 'POST /api/backups', pages: ['backups'] },
  downloadBackup: { label: 'Download', route: 'GET /api/backups/{backup_id}/download', pages: ['backups'] },
  validateBackup: { label: 'Validate', route: 'POST /api/backups/{backup_id}/validate', pages: ['backups'] },
  restoreBackup: { label: 'Restore…', route: 'POST /api/backups/{backup_id}/restore', pages: ['backups'] },
  redeliver: { label: 'Redeliver', route: 'POST /api/notifications/deliveries/{id}/redeliver', pages: ['deliveries'] },
  newEntitlement: { label: 'New entitlement', route: 'POST /api/entitlements', pages: ['entitlements'] },
  newToken: { label: 'New token', route: 'POST /api/tokens', pages: ['tokens'] },
  revokeToken: { label: 'Revoke', route: 'POST /api/tokens/{id}/revoke', pages: ['tokens'] },
} as const satisfies Record<string, Action>;

export type ActionName = keyof typeof ACTIONS;
