import assert from 'node:assert/strict';
import { generateKeyPairSync, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ed25519 } from '@noble/curves/ed25519.js';
import {
  keyIdOf,
  LicenseClient,
  LicenseClientConfigError,
  parseKeySet,
  verifyGraceToken,
  verifyLicenseFile,
  type LicenseClientOptions,
  type ValidationResult,
} from '../../src/client/index.js';
import { publicKeyToPem } from '../../src/lib/crypto/ed25519-pem.js';
import { LicenseServerError } from '../../src/lib/errors.js';
import { encodeGraceToken, type GraceTokenClaims } from '../../src/lib/licensing/grace-token.js';
import { generateLicenseKey, licenseKeyPrefix } from '../../src/lib/licensing/license-key.js';
import { signEd25519 } from '../../src/lib/offline/ed25519.js';
import { canonicalPayloadBytes, encodeLicenseFile, type LicenseFilePayload } from '../../src/lib/offline/format.js';
import { freePort } from '../support/license-fixture.js';

const HOUR = 3_600_000;
const HARDWARE_ID = 'test-machine';

/** A signing key as a server holds it: the secret half signs, the public half goes into clients. */
function keyPair() {
  const secretKey = ed25519.utils.randomSecretKey();
  const publicKey = ed25519.getPublicKey(secretKey);
  return { secretKey, publicKey, pem: publicKeyToPem(publicKey), keyId: keyIdOf(publicKey) };
}

const oldKey = keyPair();
const newKey = keyPair();
const licenseKey = generateLicenseKey();
const licenseId = randomUUID();
const seconds = (ms: number) => new Date(ms).toISOString().slice(0, 19) + 'Z';
const entitlements = [{ code: 'seats', name: 'Seats', usage_limit: 10 }];

/** A `.lic` file for `licenseKey`, unbound, valid now, signed by `signer`; `keyId` as the server writes it (or none). */
function licenseFile(signer: { secretKey: Uint8Array }, keyId: string | undefined): string {
  const now = Date.now();
  const payload: LicenseFilePayload = {
    version: 1,
    license_id: licenseId,
    license_key_prefix: licenseKeyPrefix(licenseKey),
    customer_name: 'Key Set Co',
    license_type: 'time_based',
    valid_from: seconds(now - 24 * HOUR),
    valid_until: seconds(now + 30 * 24 * HOUR),
    hardware_id: '',
    entitlements,
    issued_at: seconds(now - HOUR),
    issuer: 'licenses.example.com',
    ...(keyId === undefined ? {} : { key_id: keyId }),
  };
  return encodeLicenseFile(payload, signEd25519(canonicalPayloadBytes(payload), signer.secretKey));
}

/** A grace token for `licenseKey` on this machine, valid now, signed by `signer` with `kid` in its header. */
function graceToken(signer: { secretKey: Uint8Array }, kid: string): string {
  const iat = Math.floor(Date.now() / 1000) - 60;
  const claims: GraceTokenClaims = {
    iss: 'licenses.example.com',
    sub: licenseId,
    iat,
    nbf: iat,
    exp: iat + 72 * 3600,
    jti: randomUUID(),
    license_id: licenseId,
    license_key_prefix: licenseKeyPrefix(licenseKey),
    license_type: 'time_based',
    hardware_id: HARDWARE_ID,
    license_valid_until: seconds(Date.now() + 30 * 24 * HOUR),
    entitlements,
  };
  return encodeGraceToken(claims, kid, (message) => signEd25519(message, signer.secretKey));
}

/** A PKCS#8 "PRIVATE KEY" block, as a vendor might paste by mistake. */
const privatePem = generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }).toString();

const codes = (result: ValidationResult) => result.failures.map((failure) => failure.code);

describe('clients with a key set: files and grace tokens of either key, across a rotation', function () {
  this.timeout(20_000);
  let work: string;
  let n = 0;
  let unreachable: string;
  const clients: LicenseClient[] = [];

  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'key-sets-'));
    // Nothing listens here: every validation finds the server unreachable and goes offline.
    unreachable = `127.0.0.1:${await freePort()}`;
  });
  afterEach(() => {
    for (const client of clients.splice(0)) client.close();
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  /** A client of `licenseKey` with offline mode on, a fresh cache and `publicKey` as given. */
  const client = (publicKey: NonNullable<LicenseClientOptions['offline']>['publicKey'], overrides: { serverAddr?: string; licenseFile?: string; cacheDir?: string } = {}) => {
    n += 1;
    const created = new LicenseClient({
      serverAddr: overrides.serverAddr ?? unreachable,
      licenseKey,
      version: '2.1.0',
      hardwareId: HARDWARE_ID,
      requestTimeout: 2000,
      offline: {
        enabled: true,
        cacheDir: overrides.cacheDir ?? path.join(work, `cache-${n}`),
        licenseFile: overrides.licenseFile ?? path.join(work, 'missing.lic'),
        publicKey,
      },
    });
    clients.push(created);
    return created;
  };
  const writeLic = (text: string) => {
    const file = path.join(work, `file-${(n += 1)}.lic`);
    writeFileSync(file, text);
    return file;
  };

  describe('the .lic file', () => {
    it('is accepted from either key by a client given [oldPem, newPem]: key_id of the new key, and no key_id signed by the old one', async () => {
      const byNew = await client([oldKey.pem, newKey.pem], { licenseFile: writeLic(licenseFile(newKey, newKey.keyId)) }).validate();
      assert.equal(byNew.valid, true, JSON.stringify(byNew.failures));
      assert.equal(byNew.source, 'license-file');
      assert.equal(byNew.licenseId, licenseId);
      assert.deepEqual(codes(byNew), []);

      const legacy = await client([oldKey.pem, newKey.pem], { licenseFile: writeLic(licenseFile(oldKey, undefined)) }).validate();
      assert.equal(legacy.valid, true, JSON.stringify(legacy.failures));
      assert.equal(legacy.source, 'license-file');
    });

    it('is accepted with the set as signing-key show --all prints it (one text, comment lines between blocks) and as raw keys', async () => {
      const showAll = `# key_id ${newKey.keyId} active\n${newKey.pem}# key_id ${oldKey.keyId} verify-only\n${oldKey.pem}`;
      for (const publicKey of [showAll, [oldKey.publicKey, newKey.publicKey], [Buffer.from(newKey.publicKey), oldKey.pem]]) {
        for (const file of [licenseFile(newKey, newKey.keyId), licenseFile(oldKey, oldKey.keyId), licenseFile(oldKey, undefined)]) {
          const result = await client(publicKey, { licenseFile: writeLic(file) }).validate();
          assert.equal(result.source, 'license-file', JSON.stringify(result.failures));
        }
      }
    });

    it('is refused by a client given only the old key when its key_id is the new key, naming that key id', async () => {
      const result = await client(oldKey.pem, { licenseFile: writeLic(licenseFile(newKey, newKey.keyId)) }).validate();
      assert.equal(result.valid, false);
      assert.deepEqual(codes(result), ['SERVER_UNREACHABLE', 'SIGNATURE_INVALID', 'NO_GRACE_TOKEN']);
      assert.equal(
        result.failures[1]!.message,
        `signature verification failed: it is signed by key ${newKey.keyId}, which is not in the key set given (key ${oldKey.keyId})`,
      );
    });

    it('is checked with the key its key_id names only: a file naming the new key but signed by the old one is refused', async () => {
      const result = await client([oldKey.pem, newKey.pem], { licenseFile: writeLic(licenseFile(oldKey, newKey.keyId)) }).validate();
      assert.deepEqual(codes(result), ['SERVER_UNREACHABLE', 'SIGNATURE_INVALID', 'NO_GRACE_TOKEN']);
      assert.equal(result.failures[1]!.message, 'signature verification failed');
      // The same through the exported verifier, with a parsed set.
      assert.throws(
        () => verifyLicenseFile(licenseFile(oldKey, newKey.keyId), { publicKey: parseKeySet([oldKey.pem, newKey.pem]) }),
        (error: unknown) => error instanceof LicenseServerError && error.code === 'SIGNATURE_INVALID',
      );
    });
  });

  describe('the grace token', () => {
    /** An HTTP server answering every validation as valid with `token`, as a server after (or before) a rotation does. */
    async function serverHandingOut(token: string): Promise<Server> {
      const server = createHttpServer((_, res) => {
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({
          valid: true,
          license_id: licenseId,
          entitlements,
          grace_token: token,
          server_time: new Date().toISOString(),
        }));
      });
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return server;
    }

    /** Validates online once (the token is verified and cached), stops the server, validates offline. */
    async function offlineAfterOnline(publicKey: Parameters<typeof client>[0], token: string): Promise<ValidationResult> {
      const server = await serverHandingOut(token);
      const cacheDir = path.join(work, `grace-cache-${(n += 1)}`);
      try {
        const online = await client(publicKey, { serverAddr: `127.0.0.1:${(server.address() as AddressInfo).port}`, cacheDir }).validate();
        assert.equal(online.source, 'online', JSON.stringify(online.failures));
      } finally {
        await new Promise((resolve) => server.close(resolve));
      }
      return client(publicKey, { cacheDir }).validate();
    }

    it('is kept and honoured offline by a client given [oldPem, newPem] whichever key its kid names', async () => {
      for (const [signer, kid] of [[newKey, newKey.keyId], [oldKey, oldKey.keyId], [oldKey, randomUUID()]] as const) {
        const result = await offlineAfterOnline([oldKey.pem, newKey.pem], graceToken(signer, kid));
        assert.equal(result.valid, true, `kid ${kid}: ${JSON.stringify(result.failures)}`);
        assert.equal(result.source, 'grace-token');
        assert.equal(result.isOffline, true);
      }
    });

    it('of the new key is not cached by a client given only the old key, and the verifier names the key id', async () => {
      const token = graceToken(newKey, newKey.keyId);
      const result = await offlineAfterOnline(oldKey.pem, token);
      assert.equal(result.valid, false);
      assert.deepEqual(codes(result), ['SERVER_UNREACHABLE', 'LICENSE_FILE_UNREADABLE', 'NO_GRACE_TOKEN']);
      assert.throws(
        () => verifyGraceToken(token, oldKey.pem, { hardwareId: HARDWARE_ID }),
        (error: unknown) =>
          error instanceof LicenseServerError &&
          error.code === 'GRACE_TOKEN_INVALID' &&
          error.message === `grace token is invalid: signature verification failed: it is signed by key ${newKey.keyId}, which is not in the key set given (key ${oldKey.keyId})`,
      );
      assert.equal(verifyGraceToken(token, [oldKey.pem, newKey.pem]).header.kid, newKey.keyId);
    });
  });

  describe('the publicKey option', () => {
    const base = { serverAddr: '127.0.0.1:1', licenseKey, version: '1' };
    const refused = (publicKey: unknown, message: RegExp) =>
      assert.throws(
        () => new LicenseClient({ ...base, offline: { enabled: true, licenseFile: 'x.lic', cacheDir: work, publicKey: publicKey as never } }),
        (error: unknown) => error instanceof LicenseClientConfigError && message.test(error.message),
      );

    it('refuses a PEM with a PRIVATE KEY block, naming the block, in one text or as an item of a list', () => {
      refused(`${oldKey.pem}${privatePem}`, /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY".*: offline\.publicKey: block 2 is a private key \("PRIVATE KEY"\); a key set holds public keys only/);
      refused([newKey.pem, privatePem], /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY".*: offline\.publicKey 2: block 1 is a private key/);
    });

    it('refuses the same key twice, naming its key id, whether as PEM or as raw bytes', () => {
      const twice = new RegExp(`^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY".*: offline\\.publicKey: key ${oldKey.keyId} appears twice$`);
      refused([oldKey.pem, oldKey.pem], twice);
      refused([oldKey.pem, newKey.pem, oldKey.publicKey], twice);
      refused(`${oldKey.pem}\n${oldKey.pem}`, twice);
    });

    it('counts an empty list as no key, and refuses what is not a key', () => {
      refused([], /^public key is required$/);
      refused('', /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY".*no PEM "PUBLIC KEY" block/);
      refused(new Uint8Array(31), /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY"/);
      refused([oldKey.pem, 42], /offline\.publicKey 2: expected 32 raw Ed25519 bytes or a PEM "PUBLIC KEY"/);
      refused(42, /^public key must be 32 raw Ed25519 bytes or a PEM "PUBLIC KEY", or a list of them$/);
    });
  });
});
