import type { FunctionComponent } from 'preact';
import type { Session } from '../session.js';
import { AttentionView } from './attention.js';
import { AuditView } from './audit.js';
import { BackupsView } from './backups.js';
import { CustomersView } from './customers.js';
import { DeliveriesView } from './deliveries.js';
import { EntitlementsView } from './entitlements.js';
import { LicensesView } from './licenses.js';
import { MachinesView } from './machines.js';
import { SigningKeysView } from './signing-keys.js';
import { TokensView } from './tokens.js';

export interface ViewProps {
  readonly session: Session;
  /** The record's id for a detail page (`/admin/licenses/<id>`), or 'new' for a create form. */
  readonly id: string | undefined;
  readonly query: URLSearchParams;
}

export interface View {
  /** The first path segment under /admin ('' for the home page). */
  readonly path: string;
  readonly title: string;
  /** The route whose answer the page shows: the page is offered when the token may call it. */
  readonly route: string;
  readonly component: FunctionComponent<ViewProps>;
}

/** Every page of the console; the daemon serves the page at each of these paths (src/http/routes/admin-page.ts). */
export const views: readonly View[] = [
  { path: '', title: 'Attention', route: 'GET /api/attention', component: AttentionView },
  { path: 'licenses', title: 'Licenses', route: 'GET /api/licenses', component: LicensesView },
  { path: 'customers', title: 'Customers', route: 'GET /api/customers', component: CustomersView },
  { path: 'machines', title: 'Machines', route: 'GET /api/machines', component: MachinesView },
  { path: 'entitlements', title: 'Entitlements', route: 'GET /api/entitlements', component: EntitlementsView },
  { path: 'audit', title: 'Audit log', route: 'GET /api/audit', component: AuditView },
  { path: 'deliveries', title: 'Deliveries', route: 'GET /api/notifications/deliveries', component: DeliveriesView },
  { path: 'backups', title: 'Backups', route: 'GET /api/backups', component: BackupsView },
  { path: 'signing-keys', title: 'Signing keys', route: 'GET /api/signing-keys', component: SigningKeysView },
  { path: 'tokens', title: 'Tokens', route: 'GET /api/tokens', component: TokensView },
];
