import { api } from './serve.js';

const DAY = 86_400_000;
const date = (daysFromNow: number) => new Date(Date.now() + daysFromNow * DAY).toISOString().slice(0, 10);

export interface ConsoleDemo {
  readonly customerId: string;
  readonly customerName: string;
  readonly licenseId: string;
  readonly licenseKey: string;
  readonly keyPrefix: string;
  readonly machineId: string;
  readonly hardwareId: string;
}

/**
 * Fills a fresh daemon through its API as a small license business looks: the console's
 * pictures and the browser suite's "support person" start from it.
 */
export async function seedConsoleDemo(base: string, token: string, _work: string): Promise<ConsoleDemo> {
  const call = async (method: string, route: string, body?: unknown) => {
    const answer = await api(base, method, route, { token, body });
    if (answer.status >= 300) throw new Error(`${method} ${route}: ${answer.status} ${answer.text}`);
    return answer.body;
  };
  for (const [code, name] of [['PRO', 'Professional features'], ['EXPORT', 'PDF and CSV export'], ['SEATS', 'Extra seats'], ['API_CALLS', 'API calls per month']]) {
    await call('POST', '/api/entitlements', { code, name });
  }
  const customers = [
    ['Acme Corporation', 'licensing@acme.example'],
    ['Globex GmbH', 'it@globex.example'],
    ['Initech Ltd', 'peter@initech.example'],
    ['Umbrella Research', null],
    ['Stark Industries', 'procurement@stark.example'],
  ] as const;
  const ids: string[] = [];
  for (const [name, email] of customers) ids.push((await call('POST', '/api/customers', { name, ...(email ? { email } : {}) })).id);
  const license = (customerId: string, validUntil: string, extra: Record<string, unknown> = {}) =>
    call('POST', '/api/licenses', { customer_id: customerId, type: 'hybrid', valid_until: validUntil, ...extra });
  const main = await license(ids[0]!, date(5), { max_machines: 6, entitlements: [{ code: 'PRO' }, { code: 'API_CALLS', usage_limit: 1000 }] });
  await license(ids[0]!, date(400), { max_machines: 10, entitlements: [{ code: 'PRO' }, { code: 'EXPORT' }] });
  await license(ids[1]!, date(25), { max_machines: 2, floating: true, entitlements: [{ code: 'SEATS', usage_limit: 50 }] });
  const full = await license(ids[1]!, date(200), { max_machines: 1 });
  await license(ids[2]!, date(2), { type: 'time_based' });
  const suspended = await license(ids[3]!, date(90), { type: 'usage_based', entitlements: [{ code: 'API_CALLS', usage_limit: 100 }] });
  await call('POST', `/api/licenses/${suspended.id}/deactivate`);
  await license(ids[4]!, date(3650), { with_decryption_key: true, max_machines: 5 });
  const validate = (key: string, hardwareId: string, machineName: string) =>
    api(base, 'POST', '/api/v1/validate', { body: { license_key: key, hardware_id: hardwareId, version: '2.4.1', machine_name: machineName } });
  for (const [hardwareId, name] of [['ACME-WS-0001', 'design workstation'], ['ACME-WS-0002', 'build server'], ['ACME-LAPTOP-17', "Wile's laptop"]] as const) {
    await validate(main.key, hardwareId, name);
  }
  await validate(full.key, 'GLOBEX-SRV-1', 'render node');
  await call('POST', `/api/licenses/${main.id}/checkout`, { ttl_days: 30, hardware_id: 'ACME-AIRGAP-9' });
  const machines = await call('GET', `/api/machines?license_id=${main.id}`);
  return {
    customerId: ids[0]!,
    customerName: customers[0][0],
    licenseId: main.id,
    licenseKey: main.key,
    keyPrefix: main.key_prefix,
    machineId: machines[0].id,
    hardwareId: String(machines[0].hardware_id),
  };
}
