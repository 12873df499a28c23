/**
 * docs/openapi.json, built from these tables by scripts/openapi/make.ts. One operation per
 * route of src/http/routes (test/http/openapi-routes.test.ts holds them together); the
 * answers every operation shares (the router's, the token's, the body reader's, Node's) are
 * added here once, so an operation lists only what is its own.
 */
import { readFileSync } from 'node:fs';
import { ref, requests, schemas, type Schema } from './schemas.js';
import { CONSOLE_VIEWS } from '../../src/http/routes/admin-page.js';

/** Real answers by operationId and status, kept by capture-examples.ts. */
type Examples = Record<string, Record<string, unknown>>;
const examplesOf = (): Examples => JSON.parse(readFileSync(new URL('./examples.json', import.meta.url), 'utf8')) as Examples;
const captured = (value: unknown) => ({ captured: { summary: 'A real answer, captured by scripts/openapi/capture-examples.ts', value } });

type Access = 'admin' | 'client' | 'public';
type Status = number;

interface Answer {
  readonly description: string;
  /** A JSON body; `null` for none. */
  readonly json?: Schema | null;
  /** Other bodies by media type. */
  readonly content?: Record<string, Schema>;
  readonly headers?: readonly string[];
}

interface Operation {
  readonly method: 'get' | 'post' | 'patch';
  readonly path: string;
  readonly id: string;
  readonly tag: string;
  readonly summary: string;
  readonly access: Access;
  /** Admin routes: the scope a token needs; `any` for any valid token. */
  readonly scope?: string;
  readonly query?: readonly string[];
  /** Query parameters of this route alone, or that mean something else here than in QUERY. */
  readonly querySchemas?: Readonly<Record<string, Schema & { description: string }>>;
  readonly requiredQuery?: readonly string[];
  readonly body?: Schema;
  /** A POST that also takes no body (Content-Length: 0 reads as {}). */
  readonly bodyOptional?: boolean;
  /** The body's media type, when not JSON. */
  readonly bodyType?: string;
  readonly answers: Record<Status, Answer>;
  /** Error statuses of the route itself, beyond the shared ones. */
  readonly errors?: readonly Status[];
}

const PAGING = ['limit', 'cursor', 'offset', 'format'];

const QUERY: Record<string, Schema & { description: string }> = {
  limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100, description: 'Rows in the page.' },
  cursor: { type: 'string', description: 'The page after the one that gave it (opaque; the `Link` header carries it).' },
  offset: { type: 'integer', minimum: 0, maximum: 10000, description: 'Rows to skip (clients written before cursors); not with `cursor`.' },
  format: { type: 'string', enum: ['json', 'csv'], description: '`csv`: every row of the filtered list from this position on, as CSV (as does `Accept: text/csv`); `json` (the default) one page. See [CSV export and import](http-api.md#csv-export-and-import).' },
  dry_run: { type: 'boolean', description: '`true`: check every row, report each error by line, write nothing.' },
  active: { type: 'boolean', description: '`true` or `false`.' },
  customer_id: { type: 'string', format: 'uuid', description: "The licenses of this customer." },
  type: { type: 'string', enum: ['time_based', 'usage_based', 'hybrid'], description: 'The licenses of this type.' },
  since: { type: 'string', description: 'A date or RFC 3339 time: entries at or after it.' },
  until: { type: 'string', description: 'A date or RFC 3339 time: entries before it.' },
  action: { type: 'string', description: 'An audit action such as `license.created`.' },
  actor: { type: 'string', description: 'An actor such as `token:ci`.' },
  entity_type: { type: 'string', description: 'The kind of record, such as `license`.' },
  entity_id: { type: 'string', description: "The record's id." },
  license_id: { type: 'string', format: 'uuid', description: 'The machines of this license.' },
  holding_seat: { type: 'boolean', description: 'Only machines that hold (`true`) or do not hold (`false`) a seat now.' },
  status: { type: 'string', enum: ['pending', 'delivered', 'failed'], description: 'Deliveries in this status.' },
  event: { type: 'string', description: 'An event name such as `backup.failed`.' },
  target: { type: 'string', description: 'A name under `backup.targets`: list what that off-site target holds.' },
  max_age: { type: 'string', description: 'Such as `26h` or `8d`: a place without a good backup newer than this is `stale`.' },
  place: { type: 'string', description: '`local` or a target\'s name.' },
  include_revoked: { type: 'boolean', description: 'Revoked tokens too (`true`); by default only live ones, expired ones included.' },
  // The list filters of issue 36 (src/http/list-filters.ts; http-api.md, "Filters and counts").
  'status@licenses': { type: 'string', enum: ['active', 'expiring', 'expired', 'suspended', 'pending'], description: 'Licenses whose `status` is this now (with `within`, see there).' },
  within: { type: 'string', pattern: '^\\d{1,5}[hdwy]$', description: 'With `status=expiring`: ending within this span from now (default `7d`); with `status=expired`: ended within it, such as `30d`.' },
  seats: { type: 'string', enum: ['full'], description: '`full`: machines holding a seat at or over `max_machines`.' },
  usage: { type: 'string', enum: ['high'], description: '`high`: some entitlement used at 80 % of its limit or more.' },
  entitlement: { type: 'string', description: 'Licenses granted the entitlement of this code.' },
  created_after: { type: 'string', description: 'A date or RFC 3339 time: created at or after it.' },
  created_before: { type: 'string', description: 'A date or RFC 3339 time: created before it.' },
  expires_after: { type: 'string', description: 'A date or RFC 3339 time: `valid_until` at or after it.' },
  expires_before: { type: 'string', description: 'A date or RFC 3339 time: `valid_until` before it.' },
  validated_after: { type: 'string', description: 'A date or RFC 3339 time: some machine of the license seen (validated online or checked out) at or after it.' },
  validated_before: { type: 'string', description: 'A date or RFC 3339 time: no machine of the license seen since it (also: never).' },
  'active@machines': { type: 'boolean', description: '`false`: machines an operator deactivated; `true`: the others.' },
  hardware_id: { type: 'string', description: 'The machines with this hardware ID (exactly).' },
  last_seen_after: { type: 'string', description: 'A date or RFC 3339 time: `last_seen` at or after it.' },
  last_seen_before: { type: 'string', description: 'A date or RFC 3339 time: `last_seen` before it.' },
  retrying: { type: 'boolean', description: '`true`: pending deliveries already tried and failed, waiting for their next attempt.' },
};

const LICENSE_FILTERS = ['customer_id', 'active', 'type', 'status@licenses', 'within', 'seats', 'usage', 'entitlement', 'created_after', 'created_before', 'expires_after', 'expires_before', 'validated_after', 'validated_before'];
const MACHINE_FILTERS = ['license_id', 'holding_seat', 'active@machines', 'hardware_id', 'last_seen_after', 'last_seen_before'];
const AUDIT_FILTERS = ['action', 'actor', 'entity_type', 'entity_id', 'since', 'until'];
const COUNT = 'How many rows the filters select: exact up to 10,000, past that `{"count": 10000, "exact": false}` (at least that many).';

const json = (schema: Schema | null, description: string, headers: readonly string[] = []): Answer => ({ description, json: schema, headers });
/** A list's rows as CSV (`?format=csv`, `Accept: text/csv`): every page, streamed. */
const csv = (item: string): Record<string, Schema> => ({
  'text/csv; charset=utf-8; header=present': {
    type: 'string',
    description: `RFC 4180 CSV of every row from the request's position to the end of the list, streamed: a header row naming the members of ${item}, then a row per ${item}; nested values as JSON, formula starts escaped with \`'\` ([CSV export and import](http-api.md#csv-export-and-import)).`,
  },
});
const list = (item: string, description: string): Answer => ({ ...json({ type: 'array', items: ref(item) }, description, ['Link', 'Content-Disposition']), content: csv(item) });
const LIST_ORDER = 'One page ([Paging](http-api.md#paging)); `Link` names the next when more rows follow.';
const HTML_HEADERS = ['Content-Security-Policy', 'X-Frame-Options', 'Referrer-Policy'];

const operations: Operation[] = [
  // Health
  { method: 'get', path: '/healthz', id: 'getHealth', tag: 'Health', summary: 'The process runs', access: 'public', answers: { 200: json(ref('Status'), '`{"status": "ok"}`') } },
  {
    method: 'get', path: '/readyz', id: 'getReadiness', tag: 'Health', summary: 'The database answers, holds the signing key and takes writes', access: 'public',
    answers: { 200: json(ref('Status'), '`{"status": "ready"}`') },
  },
  // The admin page
  ...[['/', 'getRoot'], ['/admin', 'getAdminRedirect']].map(([path, id]): Operation => ({
    method: 'get', path: path!, id: id!, tag: 'Admin page', summary: 'Redirects to /admin/', access: 'public',
    answers: { 302: { description: 'To `/admin/`.', content: { 'text/plain': { type: 'string', maxLength: 0 } }, headers: ['Location'] } },
  })),
  ...([['/admin/', 'getAdminPage', 'text/html; charset=utf-8', "The page's HTML"], ['/admin/admin.js', 'getAdminScript', 'text/javascript; charset=utf-8', "The page's script"], ['/admin/admin.css', 'getAdminStyle', 'text/css; charset=utf-8', "The page's style sheet"]] as const).map(
    ([path, id, type, summary]): Operation => ({
      method: 'get', path, id, tag: 'Admin page', summary, access: 'public',
      answers: { 200: { description: `${summary}, shipped inside the package.`, content: { [type]: { type: 'string' } }, headers: HTML_HEADERS } },
    }),
  ),
  ...CONSOLE_VIEWS.flatMap((view): Operation[] => {
    const name = view.replace(/(^|-)(\w)/g, (_, __, c: string) => c.toUpperCase());
    const answers = { 200: { description: 'The console page, which shows this view (the same HTML as `/admin/`).', content: { 'text/html; charset=utf-8': { type: 'string' } }, headers: HTML_HEADERS } };
    return [
      { method: 'get', path: `/admin/${view}`, id: `getConsole${name}`, tag: 'Admin page', summary: `The console's ${view} list`, access: 'public', answers },
      { method: 'get', path: `/admin/${view}/{id}`, id: `getConsole${name}Record`, tag: 'Admin page', summary: `The console's page of one of the ${view}`, access: 'public', answers },
    ];
  }),
  // The document itself
  {
    method: 'get', path: '/api/openapi.json', id: 'getOpenApiDocument', tag: 'Meta', summary: 'This document', access: 'public',
    answers: { 200: json({ type: 'object', properties: { openapi: { type: 'string', pattern: '^3\\.1\\.' }, info: { type: 'object' }, paths: { type: 'object' } }, required: ['openapi', 'info', 'paths'] }, 'docs/openapi.json as shipped in the package.') },
  },
  // Who is asking
  { method: 'get', path: '/api/whoami', id: 'getWhoami', tag: 'Tokens', summary: 'The token and its scopes', access: 'admin', scope: 'any', answers: { 200: json(ref('Whoami'), 'Who the token is and what it may do.') } },
  // Admin tokens
  { method: 'get', path: '/api/tokens', id: 'listTokens', tag: 'Tokens', summary: 'List admin tokens', access: 'admin', scope: 'admin', query: ['include_revoked', ...PAGING], answers: { 200: list('AdminToken', `Oldest first; live ones only unless \`include_revoked\`. ${LIST_ORDER}`) } },
  { method: 'post', path: '/api/tokens', id: 'createToken', tag: 'Tokens', summary: 'Create an admin token', access: 'admin', scope: 'admin', body: requests.newToken, answers: { 201: json(ref('IssuedAdminToken'), 'The token, and its secret: shown this once.') }, errors: [409] },
  { method: 'get', path: '/api/tokens/{id}', id: 'getToken', tag: 'Tokens', summary: 'An admin token', access: 'admin', scope: 'admin', answers: { 200: json(ref('AdminToken'), 'The token, revoked or not.') }, errors: [404, 422] },
  {
    method: 'post', path: '/api/tokens/{id}/revoke', id: 'revokeToken', tag: 'Tokens', summary: 'Revoke an admin token', access: 'admin', scope: 'admin', body: requests.revokeToken, bodyOptional: true,
    answers: { 200: json(ref('AdminToken'), 'The token, revoked (a revoked one as it was).') },
    errors: [404, 422],
  },
  // Signing keys
  { method: 'get', path: '/api/signing-key', id: 'getSigningKey', tag: 'Signing keys', summary: 'The active public key', access: 'admin', scope: 'read', answers: { 200: json(ref('ActiveSigningKey'), 'The active Ed25519 public key (SPKI PEM) and its key id.') } },
  { method: 'get', path: '/api/signing-keys', id: 'listSigningKeys', tag: 'Signing keys', summary: 'The key set', access: 'admin', scope: 'read', answers: { 200: json(ref('SigningKeySet'), 'Every key that verifies: `active` first, then `next` and `verify-only`, newest first.') } },
  { method: 'get', path: '/api/signing-keys/jwks', id: 'getSigningKeysJwks', tag: 'Signing keys', summary: 'The key set as a JWK Set', access: 'admin', scope: 'read', answers: { 200: json(ref('JwkSet'), 'The key set as a JWK Set (RFC 7517).') } },
  {
    method: 'post', path: '/api/signing-keys/rotate', id: 'rotateSigningKey', tag: 'Signing keys', summary: 'Rotate, or prepare the next key', access: 'admin', scope: 'admin',
    body: requests.rotate, bodyOptional: true,
    answers: {
      200: json({ oneOf: [ref('Rotation'), ref('PreparedKey')] }, 'Rotated: `{"previous", "active"}`; with `prepare`, the next key that was there already (`"created": false`).'),
      201: json(ref('PreparedKey'), 'With `prepare`: the next key, made now.'),
    },
    errors: [404, 409],
  },
  {
    method: 'post', path: '/api/signing-keys/{key_id}/retire', id: 'retireSigningKey', tag: 'Signing keys', summary: 'Retire a verify-only key', access: 'admin', scope: 'admin',
    body: requests.retire, bodyOptional: true,
    answers: { 200: json(ref('RetiredKey'), 'The key, retired.') },
    errors: [404, 409, 422],
  },
  // Public key distribution
  {
    method: 'get', path: '/.well-known/jwks.json', id: 'getJwks', tag: 'Public keys', summary: 'The key set as a JWK Set, without a token', access: 'public',
    answers: {
      200: json(ref('PublicJwkSet'), 'Every key that still verifies (RFC 7517), never a retired one, each with the endorsements of the other keys (docs/public-keys.md).', ['ETag', 'Cache-Control']),
      304: { description: 'Not modified (If-None-Match).', json: null, headers: ['ETag', 'Cache-Control'] },
    },
    errors: [429],
  },
  {
    method: 'get', path: '/api/v1/signing-keys', id: 'listPublicSigningKeys', tag: 'Public keys', summary: 'The key set as PEM, without a token', access: 'public',
    answers: {
      200: json(ref('PublicSigningKeySet'), 'Every key that still verifies (active, next, verify-only), never a retired one, each with its endorsements (docs/public-keys.md).', ['ETag', 'Cache-Control']),
      304: { description: 'Not modified (If-None-Match).', json: null, headers: ['ETag', 'Cache-Control'] },
    },
    errors: [429],
  },
  // Metrics
  {
    method: 'get', path: '/metrics', id: 'getMetrics', tag: 'Metrics', summary: 'Prometheus metrics', access: 'admin', scope: 'metrics',
    answers: { 200: { description: 'The Prometheus text format.', content: { 'text/plain; version=0.0.4; charset=utf-8': { type: 'string' } } } },
  },
  // Checkout
  {
    method: 'post', path: '/api/licenses/{id}/checkout', id: 'checkoutLicense', tag: 'Licenses', summary: 'Check out an offline license file', access: 'admin', scope: 'licenses',
    body: requests.checkout,
    answers: {
      200: {
        description: 'The file as JSON, or its bytes with `Accept: application/octet-stream` (and `Content-Disposition: attachment`).',
        json: ref('Checkout'),
        content: { 'application/octet-stream': { type: 'string' } },
        headers: ['Content-Disposition'],
      },
    },
    errors: [404, 409, 422],
  },
  // Customers
  { method: 'get', path: '/api/customers', id: 'listCustomers', tag: 'Customers', summary: 'List customers', access: 'admin', scope: 'read', query: ['active', ...PAGING], answers: { 200: list('Customer', `Oldest first. ${LIST_ORDER}`) } },
  { method: 'post', path: '/api/customers', id: 'createCustomer', tag: 'Customers', summary: 'Create a customer', access: 'admin', scope: 'licenses', body: requests.newCustomer, answers: { 201: json(ref('Customer'), 'The customer.') } },
  {
    method: 'post', path: '/api/customers/import', id: 'importCustomers', tag: 'Customers', summary: 'Create customers from CSV, all or none', access: 'admin', scope: 'licenses', query: ['dry_run'],
    body: { type: 'string', description: 'CSV with the columns of a customer export: `name` and `email` read, `id`, `active`, `created_at`, `updated_at` ignored. At most 2,000 rows and 4 MiB.' }, bodyType: 'text/csv',
    answers: { 200: json(ref('ImportReport'), 'A dry run: every row checked, nothing written.'), 201: json(ref('ImportReport'), 'Every row created, each audited and raising its event as one create.') },
  },
  { method: 'get', path: '/api/customers/{id}', id: 'getCustomer', tag: 'Customers', summary: 'A customer with its licenses summed', access: 'admin', scope: 'read', answers: { 200: json(ref('CustomerSummary'), 'The customer and its licenses summed.') }, errors: [404] },
  { method: 'patch', path: '/api/customers/{id}', id: 'updateCustomer', tag: 'Customers', summary: 'Change a customer', access: 'admin', scope: 'licenses', body: requests.customerUpdate, answers: { 200: json(ref('Customer'), 'The customer.') }, errors: [404] },
  ...(['activate', 'deactivate'] as const).map((verb): Operation => ({
    method: 'post', path: `/api/customers/{id}/${verb}`, id: `${verb}Customer`, tag: 'Customers', summary: `${verb === 'activate' ? 'Activate' : 'Deactivate'} a customer`, access: 'admin', scope: 'licenses',
    body: requests.empty, bodyOptional: true, answers: { 200: json(ref('Customer'), 'The customer.') }, errors: [404],
  })),
  // Entitlements
  { method: 'get', path: '/api/entitlements', id: 'listEntitlements', tag: 'Entitlements', summary: 'List entitlements', access: 'admin', scope: 'read', query: PAGING, answers: { 200: list('Entitlement', `By code. ${LIST_ORDER}`) } },
  { method: 'post', path: '/api/entitlements', id: 'createEntitlement', tag: 'Entitlements', summary: 'Create an entitlement', access: 'admin', scope: 'licenses', body: requests.newEntitlement, answers: { 201: json(ref('Entitlement'), 'The entitlement.') }, errors: [409] },
  // Licenses
  { method: 'get', path: '/api/licenses', id: 'listLicenses', tag: 'Licenses', summary: 'List licenses', access: 'admin', scope: 'read', query: [...LICENSE_FILTERS, ...PAGING], answers: { 200: list('License', `Oldest first. ${LIST_ORDER}`) } },
  { method: 'get', path: '/api/licenses/count', id: 'countLicenses', tag: 'Licenses', summary: 'Count licenses', access: 'admin', scope: 'read', query: LICENSE_FILTERS, answers: { 200: json(ref('ListCount'), COUNT) } },
  { method: 'post', path: '/api/licenses', id: 'createLicense', tag: 'Licenses', summary: 'Create a license', access: 'admin', scope: 'licenses', body: requests.newLicense, answers: { 201: json(ref('License'), 'The license.') }, errors: [404] },
  {
    method: 'post', path: '/api/licenses/import', id: 'importLicenses', tag: 'Licenses', summary: 'Create licenses from CSV, all or none', access: 'admin', scope: 'licenses', query: ['dry_run'],
    body: { type: 'string', description: 'CSV with the columns of a license export; the customer by `customer_id`, `customer_email` or `customer_name`. At most 2,000 rows and 4 MiB.' }, bodyType: 'text/csv',
    answers: { 200: json(ref('ImportReport'), 'A dry run: every row checked, nothing written.'), 201: json(ref('ImportReport'), 'Every row created, each with a new key, audited and raising its event as one create.') },
  },
  { method: 'get', path: '/api/licenses/{id}', id: 'getLicense', tag: 'Licenses', summary: 'A license and its recent checkouts', access: 'admin', scope: 'read', answers: { 200: json(ref('LicenseView'), 'The license and its newest five checkouts.') }, errors: [404] },
  { method: 'patch', path: '/api/licenses/{id}', id: 'updateLicense', tag: 'Licenses', summary: 'Change a license in place', access: 'admin', scope: 'licenses', body: requests.licenseUpdate, answers: { 200: json(ref('LicenseChange'), 'The license, what changed, and warnings.') }, errors: [404] },
  ...(['activate', 'deactivate'] as const).map((verb): Operation => ({
    method: 'post', path: `/api/licenses/{id}/${verb}`, id: `${verb}License`, tag: 'Licenses', summary: `${verb === 'activate' ? 'Activate' : 'Deactivate'} a license`, access: 'admin', scope: 'licenses',
    body: requests.empty, bodyOptional: true, answers: { 200: json(ref('License'), 'The license.') }, errors: [404],
  })),
  { method: 'post', path: '/api/licenses/{id}/renew', id: 'renewLicense', tag: 'Licenses', summary: 'Renew a license', access: 'admin', scope: 'licenses', body: requests.renew, answers: { 200: json(ref('LicenseChange'), 'As for PATCH.') }, errors: [404, 422] },
  { method: 'get', path: '/api/licenses/{id}/usage', id: 'listLicenseUsage', tag: 'Licenses', summary: "A license's usage reports", access: 'admin', scope: 'read', query: ['since', ...PAGING], answers: { 200: list('UsageRecord', `Newest first. ${LIST_ORDER}`) }, errors: [404] },
  // Machines
  { method: 'get', path: '/api/machines', id: 'listMachines', tag: 'Machines', summary: 'List machines', access: 'admin', scope: 'read', query: [...MACHINE_FILTERS, ...PAGING], answers: { 200: list('Machine', `Oldest first. ${LIST_ORDER}`) } },
  { method: 'get', path: '/api/machines/count', id: 'countMachines', tag: 'Machines', summary: 'Count machines', access: 'admin', scope: 'read', query: MACHINE_FILTERS, answers: { 200: json(ref('ListCount'), COUNT) } },
  { method: 'get', path: '/api/machines/{id}', id: 'getMachine', tag: 'Machines', summary: 'A machine', access: 'admin', scope: 'read', answers: { 200: json(ref('Machine'), 'The machine.') }, errors: [404] },
  ...(['deactivate', 'activate'] as const).map((verb): Operation => ({
    method: 'post', path: `/api/machines/{id}/${verb}`, id: `${verb}Machine`, tag: 'Machines', summary: `${verb === 'activate' ? 'Activate' : 'Deactivate'} a machine`, access: 'admin', scope: 'licenses',
    body: requests.empty, bodyOptional: true, answers: { 200: json(ref('MachineChange'), 'The machine and warnings.') }, errors: [404, 422],
  })),
  { method: 'post', path: '/api/machines/{id}/release', id: 'releaseMachineFiles', tag: 'Machines', summary: "Declare a machine's offline files lost", access: 'admin', scope: 'licenses', body: requests.release, answers: { 200: json(ref('MachineChange'), 'The machine and what still holds its seat.') }, errors: [404] },
  // Bulk actions
  {
    method: 'post', path: '/api/bulk', id: 'startBulkJob', tag: 'Bulk', summary: 'Act on every row of a filter, or preview it', access: 'admin', scope: 'licenses', body: requests.bulk,
    answers: {
      200: json(ref('BulkPreview'), 'With `dry_run`: the count of rows the job would act on, and the first few. Nothing is made.'),
      202: json(ref('BulkJob'), 'The job, queued for a daemon to run in batches; `Location` is where its progress is.', ['Location']),
    },
    errors: [409],
  },
  { method: 'get', path: '/api/bulk', id: 'listBulkJobs', tag: 'Bulk', summary: 'List bulk jobs', access: 'admin', scope: 'read', query: [...PAGING], answers: { 200: json({ type: 'array', items: ref('BulkJob') }, `Newest first. ${LIST_ORDER}`, ['Link']) } },
  { method: 'get', path: '/api/bulk/{id}', id: 'getBulkJob', tag: 'Bulk', summary: "A bulk job and its progress", access: 'admin', scope: 'read', answers: { 200: json(ref('BulkJob'), 'The job.') }, errors: [404] },
  {
    method: 'post', path: '/api/bulk/{id}/cancel', id: 'cancelBulkJob', tag: 'Bulk', summary: 'Cancel a bulk job', access: 'admin', scope: 'licenses', body: requests.empty, bodyOptional: true,
    answers: { 200: json(ref('BulkJob'), 'The job, cancelled: what its batches did stays done and counted.') },
    errors: [404, 409],
  },
  // Audit
  { method: 'get', path: '/api/audit', id: 'listAudit', tag: 'Audit', summary: 'Read the audit log', access: 'admin', scope: 'read', query: [...AUDIT_FILTERS, ...PAGING], answers: { 200: list('AuditEntry', `Newest first. ${LIST_ORDER}`) } },
  { method: 'get', path: '/api/audit/count', id: 'countAudit', tag: 'Audit', summary: 'Count audit entries', access: 'admin', scope: 'read', query: AUDIT_FILTERS, answers: { 200: json(ref('ListCount'), COUNT) } },
  // Attention
  {
    method: 'get', path: '/api/attention', id: 'getAttention', tag: 'Attention', summary: 'What needs an operator now', access: 'admin', scope: 'read',
    answers: { 200: json(ref('Attention'), 'Counts of the records to look at, each with the API query that lists them; backups and the signing key.') },
  },
  // Search
  {
    method: 'get', path: '/api/search', id: 'search', tag: 'Search', summary: 'Find records of every kind from one query', access: 'admin', scope: 'read',
    query: ['q', 'limit'],
    requiredQuery: ['q'],
    querySchemas: {
      q: { type: 'string', minLength: 1, maxLength: 200, description: 'What was typed: a license key or a prefix of one, part of a customer\'s name or email, a hardware ID or a prefix of one, the start of a machine name or an entitlement code, a record\'s id (UUID) or an audit entry\'s number. Trimmed; at most 200 characters.' },
      limit: { type: 'integer', minimum: 1, maximum: 50, default: 10, description: 'Items per group.' },
    },
    answers: { 200: json(ref('SearchResults'), 'Matches grouped by kind, each group with at most `limit` items and whether there are `more`. A `read` token gets `key_prefix` without `key`, and no `admin_tokens` group unless it has `admin`.') },
  },
  // Backups
  {
    method: 'get', path: '/api/backups', id: 'listBackups', tag: 'Backups', summary: 'List backups', access: 'admin', scope: 'backups', query: [...PAGING, 'target'],
    answers: { 200: { ...json(ref('BackupList'), `Newest first, with the schedule and what interrupted runs left; with \`target\`, what that target holds. ${LIST_ORDER} As CSV, the backups alone.`, ['Link', 'Content-Disposition']), content: csv('Backup') } },
    errors: [404, 502],
  },
  { method: 'post', path: '/api/backups', id: 'createBackup', tag: 'Backups', summary: 'Make a backup', access: 'admin', scope: 'backups', body: requests.empty, bodyOptional: true, answers: { 201: json(ref('NewBackup'), 'The backup.') }, errors: [409, 422] },
  { method: 'get', path: '/api/backups/status', id: 'getBackupStatus', tag: 'Backups', summary: 'Where the newest good backups are, and their age', access: 'admin', scope: 'backups', query: ['max_age', 'place'], answers: { 200: json(ref('BackupStatus'), 'Local storage and each target.') }, errors: [404] },
  {
    method: 'get', path: '/api/backups/{backup_id}/download', id: 'downloadBackup', tag: 'Backups', summary: "A backup's archive", access: 'admin', scope: 'backups',
    answers: { 200: { description: "The archive's bytes, streamed; an unencrypted one only to a token with `admin`.", content: { 'application/octet-stream': { type: 'string', contentMediaType: 'application/octet-stream' } }, headers: ['Content-Disposition'] } },
    errors: [404],
  },
  { method: 'post', path: '/api/backups/{backup_id}/validate', id: 'validateBackup', tag: 'Backups', summary: 'Validate a backup thoroughly', access: 'admin', scope: 'backups', body: requests.validateBackup, bodyOptional: true, answers: { 200: json(ref('BackupValidation'), 'Every check passed.') }, errors: [404, 409, 422, 502] },
  {
    method: 'post', path: '/api/backups/{backup_id}/restore', id: 'restoreBackup', tag: 'Backups', summary: 'Restore a backup, or preview it', access: 'admin', scope: 'restore', body: requests.restore, bodyOptional: true,
    answers: { 200: json({ oneOf: [ref('RestoreReport'), ref('RestorePreview')] }, 'The report, or with `dry_run` the rehearsal\'s answer: the backup checked as the restore checks it, and what the restore would do to the signing keys. Another server\'s backup is restored only with `replace_keys` from an `admin` token.') },
    errors: [404, 409, 422, 502],
  },
  {
    method: 'post', path: '/api/replicas/{target}/restore', id: 'restoreReplica', tag: 'Backups', summary: 'Restore a replica to a point in time, or preview it', access: 'admin', scope: 'restore', body: requests.restoreReplica,
    answers: { 200: json({ oneOf: [ref('ReplicaRestoreReport'), ref('ReplicaRestorePreview')] }, 'The restore\'s report, or with `dry_run` the rehearsal\'s answer, each with the replica\'s moment and where the configuration came from. SQLite only: a PostgreSQL store answers `400 INVALID_INPUT` (pgBackRest restores it).') },
    errors: [400, 403, 404, 409, 422, 503],
  },
  { method: 'post', path: '/api/backups/{backup_id}/copy', id: 'copyBackup', tag: 'Backups', summary: 'Copy a backup to off-site targets now', access: 'admin', scope: 'backups', body: requests.copy, bodyOptional: true, answers: { 200: json(ref('BackupCopies'), 'Each copy and its outcome.') }, errors: [404, 409, 502] },
  // Notifications
  { method: 'get', path: '/api/notifications/deliveries', id: 'listDeliveries', tag: 'Notifications', summary: 'List deliveries', access: 'admin', scope: 'read', query: ['status', 'event', 'retrying', ...PAGING], answers: { 200: list('Delivery', `Newest first. ${LIST_ORDER}`) } },
  { method: 'get', path: '/api/notifications/deliveries/{id}', id: 'getDelivery', tag: 'Notifications', summary: 'A delivery', access: 'admin', scope: 'read', answers: { 200: json(ref('Delivery'), 'The delivery.') }, errors: [404] },
  { method: 'post', path: '/api/notifications/deliveries/{id}/redeliver', id: 'redeliver', tag: 'Notifications', summary: 'Send a delivery again', access: 'admin', scope: 'admin', body: requests.empty, bodyOptional: true, answers: { 200: json(ref('Delivery'), 'The delivery, pending.') }, errors: [404, 422] },
  // Client routes
  { method: 'post', path: '/api/v1/validate', id: 'validateLicense', tag: 'Client', summary: 'Validate a license online', access: 'client', body: requests.validate, answers: { 200: json(ref('Validation'), 'Valid, or an authoritative "no".') } },
  {
    method: 'post', path: '/api/v1/usage', id: 'reportUsage', tag: 'Client', summary: 'Report usage', access: 'client', body: requests.usage,
    answers: { 200: json(ref('UsageAnswer'), 'Already counted under this idempotency key (`"replayed": true`).'), 201: json(ref('UsageAnswer'), 'Counted.') },
    errors: [404, 409, 422],
  },
  { method: 'post', path: '/api/v1/release', id: 'releaseSeat', tag: 'Client', summary: 'Give a floating seat back', access: 'client', body: requests.releaseSeat, answers: { 200: json(ref('ReleaseAnswer'), 'When the seat is free.') }, errors: [404] },
];

const TAGS: Record<string, string> = {
  Health: 'Liveness and readiness probes.',
  'Admin page': 'The admin web page, shipped inside the package.',
  Meta: 'This document.',
  Tokens: 'Who the admin token is; admin tokens: create, list, revoke.',
  'Signing keys': 'The Ed25519 keys that sign offline files and grace tokens (admin).',
  'Public keys': 'The verifying keys for applications, without a token.',
  Metrics: 'Prometheus metrics.',
  Customers: 'Customers.',
  Entitlements: 'Entitlements (licensed features).',
  Licenses: 'Licenses, checkouts, renewals and usage.',
  Machines: 'The machines that use licenses, and their seats.',
  Bulk: 'One action over every row of a list filter: a preview, then a job run in batches.',
  Audit: 'The audit log.',
  Attention: 'What needs an operator now: counts that link to their lists.',
  Search: 'One search box over every kind of record.',
  Backups: 'Backups: create, list, download, validate, restore, copy.',
  Notifications: 'Webhook and email deliveries of the outbox.',
  Client: 'What the client library calls: a license key in the body, no token, rate-limited per address.',
};

const ERRORS: Record<Status, string> = {
  400: 'A request the API refuses: `INVALID_INPUT`, `INVALID_JSON`, `INVALID_ID` and the other 400 codes of the error table.',
  401: 'No valid admin token: `UNAUTHORIZED`, `TOKEN_EXPIRED` (with `WWW-Authenticate: Bearer`).',
  403: "The token's scopes do not cover the route: `TOKEN_SCOPE` (and `BACKUP_UNENCRYPTED` for an unencrypted backup's download).",
  404: 'The record is not there (`*_NOT_FOUND`, `TARGET_NOT_CONFIGURED`).',
  408: 'The request did not arrive in time: `REQUEST_TIMEOUT` (the connection is closed).',
  409: 'A conflict with the stored state (`*_EXISTS`, `IDEMPOTENCY_KEY_REUSED`, `BACKUP_IN_PROGRESS`, `BULK_JOB_RUNNING`, `SIGNING_KEY_CONFLICT`, `DATABASE_IN_USE`, ...).',
  413: 'The body is over 1 MiB: `BODY_TOO_LARGE` (a CSV import over 2,000 rows or 4 MiB: `IMPORT_TOO_LARGE`).',
  415: 'The body is not `application/json` (`text/csv` for an import): `UNSUPPORTED_MEDIA_TYPE`.',
  422: 'Refused by the rules of the record (`LICENSE_INACTIVE`, `MACHINE_LIMIT_EXCEEDED`, `BACKUP_CORRUPT`, ...).',
  429: 'Too many requests from this address: `RATE_LIMITED` (with `Retry-After`).',
  431: 'The request headers are too large: `INVALID_INPUT` (Node refuses it; the connection is closed).',
  500: 'A bug (`INTERNAL`, "internal error"; the details go to the log), or the daemon cannot do it (`FILE_WRITE_FAILED`, `SIGNING_KEK_WRONG`, ...).',
  502: 'An off-site backup target failed: `TARGET_UNAVAILABLE`, `TARGET_AUTH_FAILED`, `BACKUP_COPY_FAILED`.',
  503: 'Not serving now: `SHUTTING_DOWN`, `RESTORE_IN_PROGRESS` (with `Retry-After`), `DATABASE_UNAVAILABLE`, `DATABASE_DISK_FULL` (no room for a write: nothing was written), `DATABASE_REPLACED`, ...',
};

const HEADERS: Record<string, Schema> = {
  'X-Request-Id': { description: "The request's id: the caller's when it is 1-64 characters of `A-Za-z0-9._-`, else a new UUID.", schema: { type: 'string', pattern: '^[A-Za-z0-9._-]{1,64}$' } },
  Link: { description: 'RFC 8288 `<path?...&cursor=...>; rel="next"`, when more rows follow.', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before asking again.', schema: { type: 'string', pattern: '^[0-9]+$' } },
  ETag: { description: 'The key set\'s entity tag, for `If-None-Match`.', schema: { type: 'string' } },
  'Cache-Control': { description: 'How long a cache may keep the answer.', schema: { type: 'string' } },
  Location: { description: 'Where to go.', schema: { type: 'string' } },
  'Content-Disposition': { description: '`attachment; filename="..."`.', schema: { type: 'string' } },
  'WWW-Authenticate': { description: '`Bearer`.', schema: { type: 'string' } },
  'Content-Security-Policy': { description: "Only this origin's files: no inline script, no CDN, no framing.", schema: { type: 'string' } },
  'X-Frame-Options': { description: '`DENY`.', schema: { type: 'string' } },
  'Referrer-Policy': { description: '`no-referrer`.', schema: { type: 'string' } },
};

const headerRefs = (names: readonly string[]) => Object.fromEntries(['X-Request-Id', ...names].map((name) => [name, { $ref: `#/components/headers/${name}` }]));

function response(answer: Answer, example: unknown): Schema {
  const content: Record<string, Schema> = {};
  if (answer.json) content['application/json'] = { schema: answer.json, ...(example === undefined ? {} : { examples: captured(example) }) };
  for (const [type, schema] of Object.entries(answer.content ?? {})) content[type] = { schema };
  return { description: answer.description, headers: headerRefs(answer.headers ?? []), ...(Object.keys(content).length > 0 ? { content } : {}) };
}

/** The error statuses every operation of its kind can answer, whatever the route does. */
function sharedErrors(operation: Operation): Status[] {
  const statuses: Status[] = [400, 408, 431, 500, 503];
  if (operation.access === 'admin') statuses.push(401, 403);
  if (operation.access === 'client') statuses.push(429);
  if (operation.body) statuses.push(413, 415);
  return statuses;
}

const errorHeaders: Partial<Record<Status, readonly string[]>> = { 401: ['WWW-Authenticate'], 429: ['Retry-After'], 503: ['Retry-After'] };

function build(operation: Operation, examples: Record<string, unknown>): Schema {
  const responses: Record<string, Schema> = {};
  for (const [status, answer] of Object.entries(operation.answers)) responses[status] = response(answer, examples[status]);
  for (const status of [...new Set([...sharedErrors(operation), ...(operation.errors ?? [])])].sort()) {
    const example = examples[String(status)];
    responses[String(status)] = example === undefined
      ? { $ref: `#/components/responses/Error${status}` }
      : { ...errorResponse(status), content: { 'application/json': { schema: ref('Error'), examples: captured(example) } } };
  }
  const pathParameters = [...operation.path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ $ref: `#/components/parameters/${name}` }));
  // `status@licenses`: the parameter `status` as that route means it (QUERY has one entry per meaning).
  const query = (operation.query ?? []).map((key) => {
    const name = key.split('@')[0]!;
    const spec = operation.querySchemas?.[key] ?? QUERY[key]!;
    return { name, in: 'query', required: operation.requiredQuery?.includes(key) ?? false, description: spec.description, schema: withoutDescription(spec) };
  });
  const scope = operation.scope;
  return {
    operationId: operation.id,
    summary: operation.summary,
    tags: [operation.tag],
    ...(operation.access === 'admin' ? { security: [{ bearerToken: scope === 'any' ? [] : [scope] }], 'x-required-scope': scope } : { security: [] }),
    ...(pathParameters.length + query.length > 0 ? { parameters: [...pathParameters, ...query] } : {}),
    ...(operation.body
      ? { requestBody: { required: !operation.bodyOptional, content: { [operation.bodyType ?? 'application/json']: { schema: operation.body } }, ...(operation.bodyOptional ? { description: 'May be left out (`Content-Length: 0` reads as `{}`).' } : {}) } }
      : {}),
    responses,
  };
}

function errorResponse(status: Status): Schema {
  return { description: ERRORS[status]!, headers: headerRefs(errorHeaders[status] ?? []), content: { 'application/json': { schema: ref('Error') } } };
}

function withoutDescription(schema: Schema): Schema {
  const { description: _description, ...rest } = schema;
  return rest;
}

export function openApiDocument(version: string): Schema {
  const paths: Record<string, Record<string, Schema>> = {};
  const examples = examplesOf();
  for (const operation of operations) (paths[operation.path] ??= {})[operation.method] = build(operation, examples[operation.id] ?? {});
  const statuses = [...new Set(operations.flatMap((operation) => [...sharedErrors(operation), ...(operation.errors ?? [])]))].sort();
  return {
    openapi: '3.1.0',
    info: {
      title: 'license-server HTTP API',
      version,
      summary: 'Issues and validates software licenses; backs up and restores its own data.',
      description: 'The readable guide is [docs/http-api.md](http-api.md); this document is its contract, checked against every answer the test suite receives.',
      license: { name: 'UNLICENSED', identifier: 'LicenseRef-UNLICENSED' },
    },
    servers: [{ url: 'http://127.0.0.1:8080', description: 'The default listener (`server.host`, `server.port`).' }],
    tags: Object.entries(TAGS).map(([name, description]) => ({ name, description })),
    paths,
    components: {
      securitySchemes: {
        bearerToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'An admin token (`license-server token create`). The scopes listed per operation are the token scopes it needs (also `x-required-scope`): `read`, `licenses`, `backups`, `restore`, `metrics`; `admin` allows everything.',
        },
      },
      parameters: {
        id: { name: 'id', in: 'path', required: true, description: "The record's id (a UUID).", schema: { type: 'string' } },
        key_id: { name: 'key_id', in: 'path', required: true, description: 'A signing key id (16 hex digits).', schema: { type: 'string' } },
        backup_id: { name: 'backup_id', in: 'path', required: true, description: 'A backup id, as listed.', schema: { type: 'string' } },
        target: { name: 'target', in: 'path', required: true, description: 'The name of a target that backup.replication replicates to.', schema: { type: 'string' } },
      },
      headers: HEADERS,
      responses: Object.fromEntries(
        statuses.map((status) => [
          `Error${status}`,
          errorResponse(status),
        ]),
      ),
      schemas,
    },
  };
}

/** The route list as the document has it, `METHOD /path/{param}`. */
export function documentedRoutes(document: Schema): string[] {
  return Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) => Object.keys(item).map((method) => `${method.toUpperCase()} ${path}`));
}

