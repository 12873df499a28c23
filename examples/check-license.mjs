#!/usr/bin/env node
// An application's license check, as docs/client.md describes it: online first, then the
// .lic file, then the cached grace token; then one usage report.
//
//   LICENSE_SERVER=127.0.0.1:8080 LICENSE_KEY=XXXX-... PUBLIC_KEY_FILE=signing-key.pem \
//   LICENSE_FILE=license.lic USAGE_CODE=seats node examples/check-license.mjs
//
// HARDWARE_ID overrides the derived hardware ID; CACHE_DIR the cache directory.
import { readFileSync } from 'node:fs';
import { LicenseClient } from 'license-server/client';

const env = (name, fallback) => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) {
    console.error(`set ${name}`);
    process.exit(64);
  }
  return value;
};

const client = new LicenseClient({
  serverAddr: env('LICENSE_SERVER', '127.0.0.1:8080'),
  licenseKey: env('LICENSE_KEY'),
  version: '1.0.0',
  hardwareId: process.env.HARDWARE_ID, // undefined: derived from this machine
  offline: {
    enabled: true,
    licenseFile: env('LICENSE_FILE'),
    publicKey: readFileSync(env('PUBLIC_KEY_FILE'), 'utf8'),
    cacheDir: process.env.CACHE_DIR, // undefined: the OS configuration directory
    restrictedEntitlements: ['export'],
    allowOfflineUsageReporting: true,
  },
  onOfflineModeEnter: (remaining) => console.log(`offline mode: ${(remaining / 3_600_000).toFixed(1)} h of grace left`),
  onOfflineModeExit: () => console.log('back online'),
  onGracePeriodExpired: () => console.log('grace period over: the application should shut down'),
});

console.log(`hardware ID: ${client.hardwareId}`);
const result = await client.validate();
if (!result.valid) {
  console.log(`license not valid: ${result.failures.map((f) => `${f.tier}: ${f.code} (${f.message})`).join('; ')}`);
  client.close();
  process.exit(1);
}
console.log(`license valid (${result.isOffline ? `offline, from the ${result.source}` : 'online'})`);
console.log(`entitlements: ${result.entitlements.map((e) => `${e.code}${result.hasEntitlement(e.code) ? '' : ' (restricted offline)'}`).join(', ') || 'none'}`);
if (result.decryptionKey) console.log(`decryption key: available (${result.decryptionKey.length} bytes)`);
if (process.env.USAGE_CODE) {
  const usage = await client.reportUsage(process.env.USAGE_CODE, 1);
  console.log(usage.queued ? 'usage queued until the server is back' : `usage counted, ${usage.remaining ?? 'no limit'} left`);
}
client.close();
