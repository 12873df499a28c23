/**
 * Captures the examples of docs/openapi.json from a real daemon: starts `serve` (dist/, so
 * `npm run build` first) on a fresh SQLite store, makes a customer, a license and a machine,
 * and keeps the answers in scripts/openapi/examples.json, which make.ts puts into the
 * document. `npx tsx scripts/openapi/capture-examples.ts && npx tsx scripts/openapi/make.ts`.
 * Every answer passes test/support/openapi-check.ts on its way, and openapi-check.test.ts
 * validates the examples in the document against their schemas.
 */
import { writeFileSync } from 'node:fs';
import { api, killAllServes, startServe } from '../../test/support/serve.js';

export const EXAMPLES_URL = new URL('./examples.json', import.meta.url);

async function capture(): Promise<Record<string, Record<string, unknown>>> {
  const serve = await startServe({ LICENSE_CLIENT_RATE_LIMIT: '0' });
  const examples: Record<string, Record<string, unknown>> = {};
  const keep = async (operationId: string, method: string, path: string, options: { body?: unknown; token?: string | null } = {}) => {
    const answer = await api(serve.url, method, path, { token: options.token === null ? undefined : (options.token ?? serve.token), body: options.body });
    (examples[operationId] ??= {})[String(answer.status)] = answer.body;
    return answer.body;
  };
  try {
    await keep('getHealth', 'GET', '/healthz');
    await keep('getReadiness', 'GET', '/readyz');
    await keep('getWhoami', 'GET', '/api/whoami');
    await keep('getSigningKey', 'GET', '/api/signing-key');
    await keep('listSigningKeys', 'GET', '/api/signing-keys');
    await keep('getSigningKeysJwks', 'GET', '/api/signing-keys/jwks');
    // A prepared next key, so that the public set shows two keys endorsing each other.
    await keep('rotateSigningKey', 'POST', '/api/signing-keys/rotate', { body: { prepare: true } });
    await keep('getJwks', 'GET', '/.well-known/jwks.json', { token: null });
    await keep('listPublicSigningKeys', 'GET', '/api/v1/signing-keys', { token: null });
    const customer = await keep('createCustomer', 'POST', '/api/customers', { body: { name: 'Acme GmbH', email: 'licensing@acme.example' } });
    await keep('listCustomers', 'GET', '/api/customers', { token: serve.token });
    await keep('getCustomer', 'GET', '/api/customers/00000000-0000-4000-8000-000000000000');
    await keep('createEntitlement', 'POST', '/api/entitlements', { body: { code: 'seats', name: 'Seats' } });
    await keep('createEntitlement', 'POST', '/api/entitlements', { body: { code: 'seats', name: 'Seats' } });
    const license = await keep('createLicense', 'POST', '/api/licenses', {
      body: { customer_id: customer.id, type: 'hybrid', valid_until: '2099-12-31', entitlements: [{ code: 'seats', usage_limit: 25 }], max_machines: 3, metadata: { crm_id: 'C-1042' } },
    });
    await keep('listLicenses', 'GET', '/api/licenses', { token: null });
    const client = { license_key: license.key, hardware_id: 'HW-8F2A-1C3D' };
    await keep('validateLicense', 'POST', '/api/v1/validate', { token: null, body: { ...client, version: '2.1.0', machine_name: 'build-agent-7' } });
    await keep('reportUsage', 'POST', '/api/v1/usage', { token: null, body: { ...client, entitlement_code: 'seats', quantity: 2, occurred_at: new Date().toISOString(), idempotency_key: 'report-0001' } });
    await keep('releaseSeat', 'POST', '/api/v1/release', { token: null, body: client });
    await keep('checkoutLicense', 'POST', `/api/licenses/${license.id}/checkout`, { body: { ttl_days: 30, hardware_id: client.hardware_id } });
    await keep('getLicense', 'GET', `/api/licenses/${license.id}`);
    await keep('updateLicense', 'PATCH', `/api/licenses/${license.id}`, { body: { max_machines: 5 } });
    await keep('listMachines', 'GET', `/api/machines?license_id=${license.id}`);
    await keep('listLicenseUsage', 'GET', `/api/licenses/${license.id}/usage`);
    await keep('listAudit', 'GET', '/api/audit?limit=3');
    await keep('createBackup', 'POST', '/api/backups');
    await keep('getBackupStatus', 'GET', '/api/backups/status?max_age=26h');
  } finally {
    await serve.stop();
    killAllServes();
  }
  return examples;
}

writeFileSync(EXAMPLES_URL, `${JSON.stringify(await capture(), null, 2)}\n`);
