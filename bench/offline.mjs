#!/usr/bin/env node
// Offline license throughput, each figure beside a baseline measured in the same run:
//
//   npm run build && node bench/offline.mjs [--seconds 3] [--postgres postgres://...]
//
// - checkouts per second through the core (read license, sign, audit, commit) on SQLite
//   and on PostgreSQL, against bare Ed25519 signing of the same bytes with node:crypto
//   and with @noble/curves. The checkout is the costliest kind: a license with three
//   entitlements and a decryption key sealed for a hardware ID. Goal: SQLite checkout with
//   requests in flight (as the daemon has them) >= 0.5 x bare node:crypto signing.
// - offline verifications per second (decode + canonicalise + verify) against the bare
//   verify of the implementation it uses (@noble/curves). Goal: >= 0.8 x.
import { createPrivateKey, createPublicKey, sign as nodeSign, verify as nodeVerify } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { ed25519 } from '@noble/curves/ed25519.js';
import { createCustomer } from '../dist/lib/customers.js';
import { createEntitlement } from '../dist/lib/licensing/entitlements.js';
import { createLicense } from '../dist/lib/licensing/licenses.js';
import { checkoutLicense } from '../dist/lib/offline/checkout.js';
import { decodeLicenseFile } from '../dist/lib/offline/format.js';
import { verifyLicenseFile } from '../dist/lib/offline/verify.js';
import { ensureSigningKey, loadKeyPair } from '../dist/lib/signing-keys/keys.js';
import { openDatabase } from '../dist/lib/storage/open.js';

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const seconds = Number(arg('seconds', '3'));
const pgAdmin = arg('postgres', process.env.LICENSE_TEST_DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/postgres');
const context = { actor: 'bench', issuer: 'bench.example.com' };

/** Runs `work` for `seconds` with `concurrency` loops in flight; returns operations per second. */
async function rate(work, concurrency = 1) {
  const end = performance.now() + seconds * 1000;
  let count = 0;
  const loop = async () => {
    while (performance.now() < end) {
      await work();
      count += 1;
    }
  };
  const started = performance.now();
  await Promise.all(Array.from({ length: concurrency }, loop));
  return count / ((performance.now() - started) / 1000);
}

function rateSync(work) {
  const end = performance.now() + seconds * 1000;
  let count = 0;
  const started = performance.now();
  while (performance.now() < end) {
    for (let i = 0; i < 50; i += 1) work();
    count += 50;
  }
  return count / ((performance.now() - started) / 1000);
}

async function fixture(db) {
  await ensureSigningKey(db, context);
  const customer = await createCustomer(db, { name: 'Bench & Co <"Ω">' }, context);
  for (const code of ['export', 'seats', 'sso']) await createEntitlement(db, { code, name: `Feature ${code}` }, context);
  const license = await createLicense(db, {
    customerId: customer.id,
    type: 'hybrid',
    validUntil: '2099-12-31',
    entitlements: [{ code: 'export', usageLimit: null }, { code: 'seats', usageLimit: 25 }, { code: 'sso', usageLimit: null }],
    withDecryptionKey: true,
  }, context);
  return license;
}

const checkout = (db, license) => () => checkoutLicense(db, license.id, { ttlDays: 30, hardwareId: 'bench-machine-01' }, context);

const dir = mkdtempSync(path.join(tmpdir(), 'license-bench-'));
const results = [];
try {
  const sqlite = await openDatabase(path.join(dir, 'bench.db'));
  const license = await fixture(sqlite);
  const sample = await checkout(sqlite, license)();
  const decoded = decodeLicenseFile(sample.license_file);
  const message = decoded.signedBytes;
  const pair = await loadKeyPair(sqlite);
  const keyObject = createPrivateKey({ key: Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), pair.secretKey]), format: 'der', type: 'pkcs8' });
  const publicKeyObject = createPublicKey(keyObject);
  const signature = nodeSign(null, message, keyObject);

  // Warm-up: JIT, @noble's precomputed tables, SQLite's page cache.
  for (let i = 0; i < 200; i += 1) {
    await checkout(sqlite, license)();
    ed25519.sign(message, pair.secretKey);
    ed25519.verify(signature, message, pair.publicKey);
  }

  const bareNodeSign = rateSync(() => nodeSign(null, message, keyObject));
  const bareNobleSign = rateSync(() => ed25519.sign(message, pair.secretKey));
  const sqliteCheckout = await rate(checkout(sqlite, license));
  // As the daemon sees them: many requests in flight, which share SQLite commits.
  const sqliteCheckout16 = await rate(checkout(sqlite, license), 16);
  const plainLicense = await createLicense(sqlite, { customerId: license.customer_id, type: 'time_based', validUntil: '2099-12-31', entitlements: [{ code: 'seats', usageLimit: 25 }] }, context);
  const sqlitePlain16 = await rate(() => checkoutLicense(sqlite, plainLicense.id, { ttlDays: 30 }, context), 16);
  const bareNobleVerify = rateSync(() => ed25519.verify(signature, message, pair.publicKey));
  const bareNodeVerify = rateSync(() => nodeVerify(null, message, publicKeyObject, signature));
  const verifyRate = rateSync(() => verifyLicenseFile(sample.license_file, { publicKey: pair.publicKey, hardwareId: 'bench-machine-01' }));
  await sqlite.close();

  let pgCheckout;
  const admin = new pg.Client({ connectionString: pgAdmin });
  try {
    await admin.connect();
    const name = `license_bench_${process.pid}`;
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(pgAdmin);
    url.pathname = `/${name}`;
    try {
      const pgdb = await openDatabase(url.toString());
      const pgLicense = await fixture(pgdb);
      for (let i = 0; i < 100; i += 1) await checkout(pgdb, pgLicense)();
      pgCheckout = { one: await rate(checkout(pgdb, pgLicense)), eight: await rate(checkout(pgdb, pgLicense), 8) };
      await pgdb.close();
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    }
  } catch (error) {
    console.log(`PostgreSQL skipped: ${error.message}`);
  } finally {
    await admin.end().catch(() => undefined);
  }

  const row = (name, perSecond, baseline, goal) => {
    const ratio = baseline ? perSecond / baseline.value : undefined;
    const verdict = goal === undefined ? '' : ratio >= goal ? `goal >= ${goal}: met` : `goal >= ${goal}: MISSED`;
    results.push({ name, perSecond, ratio, goal, met: goal === undefined ? undefined : ratio >= goal });
    console.log(`${name.padEnd(52)} ${perSecond.toFixed(0).padStart(7)}/s ${ratio === undefined ? '' : `${ratio.toFixed(2)}x ${baseline.name}`.padEnd(28)} ${verdict}`);
  };
  console.log(`node ${process.version}, ${seconds} s per figure, message ${message.length} bytes, file ${sample.license_file.length} bytes`);
  row('bare Ed25519 sign, node:crypto (KeyObject)', bareNodeSign);
  row('bare Ed25519 sign, @noble/curves', bareNobleSign, { name: 'node sign', value: bareNodeSign });
  row('checkout through the core, SQLite, 1 in flight', sqliteCheckout, { name: 'node sign', value: bareNodeSign });
  row('checkout through the core, SQLite, 16 in flight', sqliteCheckout16, { name: 'node sign', value: bareNodeSign }, 0.5);
  row('  same, unbound license without a key', sqlitePlain16, { name: 'node sign', value: bareNodeSign });
  if (pgCheckout) {
    row('checkout through the core, PostgreSQL, 1 in flight', pgCheckout.one, { name: 'node sign', value: bareNodeSign });
    row('checkout through the core, PostgreSQL, 8 in flight', pgCheckout.eight, { name: 'node sign', value: bareNodeSign });
  }
  row('bare Ed25519 verify, node:crypto', bareNodeVerify);
  row('bare Ed25519 verify, @noble/curves', bareNobleVerify, { name: 'node verify', value: bareNodeVerify });
  row('offline verification (uses @noble/curves)', verifyRate, { name: 'noble verify', value: bareNobleVerify }, 0.8);
  process.exitCode = results.some((r) => r.met === false) ? 1 : 0;
} finally {
  rmSync(dir, { recursive: true, force: true });
}
