import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { createServer as createHttpServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { LicenseClient, type LicenseClientOptions } from '../../src/client/index.js';
import { api, startServe, type ServeProcess } from './serve.js';

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

export interface FixtureLicense {
  readonly id: string;
  readonly key: string;
  /** A `.lic` for it, 30 days, bound to the hardware ID `test-machine`. */
  readonly licenseFile: string;
}

export type ClientOverrides = Partial<LicenseClientOptions> & { offline?: LicenseClientOptions['offline'] };

/**
 * A real `serve` on a fixed port (so it can be stopped and started again), an admin token,
 * the signing key, and licenses with `.lic` files: what a client-library test talks to.
 */
export class LicenseFixture {
  serve: ServeProcess | undefined;
  token = '';
  pem = '';
  license!: FixtureLicense;
  customerId = '';
  private readonly clients: LicenseClient[] = [];

  private constructor(
    readonly work: string,
    readonly port: number,
    readonly databaseUrl: string,
    private readonly env: Record<string, string>,
  ) {}

  /** On SQLite in its own folder, unless `databaseUrl` names another store (a PostgreSQL database). */
  static async start(env: Record<string, string> = {}, databaseUrl?: string): Promise<LicenseFixture> {
    const work = mkdtempSync(path.join(tmpdir(), 'license-client-'));
    const fixture = new LicenseFixture(work, await freePort(), databaseUrl ?? path.join(work, 'server', 'license-server.db'), env);
    await fixture.startServer();
    fixture.token = fixture.serve!.token!;
    fixture.pem = (await fixture.api('GET', '/api/signing-key')).body.public_key_pem;
    fixture.customerId = (await fixture.api('POST', '/api/customers', { name: 'Client Co' })).body.id;
    for (const code of ['seats', 'export']) await fixture.api('POST', '/api/entitlements', { code, name: code });
    fixture.license = await fixture.createLicense();
    return fixture;
  }

  get addr(): string {
    return `127.0.0.1:${this.port}`;
  }

  async startServer(): Promise<void> {
    this.serve = await startServe({ LICENSE_DATABASE_URL: this.databaseUrl, LICENSE_CLIENT_RATE_LIMIT: '0', ...this.env }, ['--port', String(this.port)]);
  }

  async stopServer(): Promise<void> {
    await this.serve?.stop();
    this.serve = undefined;
  }

  api(method: string, route: string, body?: unknown) {
    return api(this.serve!.url, method, route, { token: this.token, ...(body === undefined ? {} : { body }) });
  }

  async createLicense(): Promise<FixtureLicense> {
    const license = (await this.api('POST', '/api/licenses', {
      customer_id: this.customerId,
      type: 'hybrid',
      valid_from: '2025-01-01',
      valid_until: '2099-01-01',
      with_decryption_key: true,
      entitlements: [{ code: 'seats', usage_limit: 100 }, { code: 'export' }],
    })).body;
    const checkout = await this.api('POST', `/api/licenses/${license.id}/checkout`, { ttl_days: 30, hardware_id: 'test-machine' });
    const licenseFile = path.join(this.work, `${license.id}.lic`);
    writeFileSync(licenseFile, checkout.body.license_file);
    return { id: license.id, key: license.key, licenseFile };
  }

  /** A client of `license` (the fixture's first by default), offline mode on, closed by closeClients(). */
  client(overrides: ClientOverrides = {}, license: FixtureLicense = this.license): LicenseClient {
    const created = new LicenseClient({
      serverAddr: this.addr,
      licenseKey: license.key,
      version: '2.1.0',
      hardwareId: 'test-machine',
      requestTimeout: 2000,
      ...overrides,
      offline: {
        enabled: true,
        cacheDir: path.join(this.work, 'cache'),
        licenseFile: license.licenseFile,
        publicKey: this.pem,
        restrictedEntitlements: ['export'],
        allowOfflineUsageReporting: true,
        ...overrides.offline,
      },
    });
    this.clients.push(created);
    return created;
  }

  closeClients(): void {
    for (const client of this.clients.splice(0)) client.close();
  }

  async cleanup(): Promise<void> {
    this.closeClients();
    await this.stopServer();
    rmSync(this.work, { recursive: true, force: true });
  }
}

/**
 * An HTTP proxy in front of the server that counts every request by path. While `failing`,
 * it answers 503 itself (a server in trouble: the client must treat it as unreachable);
 * while `hanging`, it never answers at all.
 */
export class CountingProxy {
  readonly requests: string[] = [];
  failing = false;
  hanging = false;
  private constructor(
    private readonly server: Server,
    readonly addr: string,
  ) {}

  static async start(target: () => string): Promise<CountingProxy> {
    let proxy: CountingProxy | undefined;
    const server = createHttpServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        proxy!.requests.push(req.url ?? '');
        if (proxy!.hanging) return;
        if (proxy!.failing) {
          res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":{"code":"UNAVAILABLE","message":"down for maintenance"}}');
          return;
        }
        fetch(`${target()}${req.url}`, { method: req.method, headers: { 'content-type': 'application/json' }, body: Buffer.concat(chunks) })
          .then(async (answer) => res.writeHead(answer.status, { 'content-type': 'application/json' }).end(await answer.text()))
          .catch(() => res.writeHead(502).end());
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    proxy = new CountingProxy(server, `127.0.0.1:${(server.address() as AddressInfo).port}`);
    return proxy;
  }

  count(route: string): number {
    return this.requests.filter((url) => url === route).length;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** Collects the process warnings named `name` (e.g. TimeoutOverflowWarning) until stopped. */
export function collectWarnings(name: string): { readonly seen: string[]; stop(): void } {
  const seen: string[] = [];
  const listener = (warning: Error) => {
    if (warning.name === name) seen.push(warning.message);
  };
  process.on('warning', listener);
  return { seen, stop: () => process.off('warning', listener) };
}
