import { openDatabase } from '../../src/lib/storage/open.js';

/**
 * Adds `count` customers, each with a license (metadata JSON, a decryption key), one
 * entitlement grant with usage, a machine and audit entries, straight through the storage
 * layer (the CLI would take minutes for this many). The values are drawn from `rng`, and
 * include what a conversion between engines must carry exactly: tabs, newlines and
 * backslashes (COPY escapes), characters outside ASCII and the BMP, nested JSON, bytes,
 * booleans both ways, nulls, timestamps to the millisecond.
 */
export async function fillStore(url: string, rng: () => number, count: number, label: string): Promise<void> {
  const uuid = () => {
    const hex = Array.from({ length: 32 }, () => Math.floor(rng() * 16).toString(16)).join('');
    return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-a${hex.slice(17, 20)}-${hex.slice(20)}`;
  };
  const pick = <T>(items: readonly T[]) => items[Math.floor(rng() * items.length)]!;
  const time = () => new Date(Date.UTC(2024, 0, 1) + Math.floor(rng() * 3 * 365 * 86_400_000)).toISOString();
  const words = ['Acme', 'Ünïcødé GmbH', '日本株式会社', 'tab\there', 'line\nbreak', 'back\\slash', 'emoji 🎉', "O'Brien & Co", 'plain'];
  const db = await openDatabase(url, { create: false });
  try {
    await db.transaction(async (tx) => {
      const entitlement = uuid();
      await tx.execute('INSERT INTO entitlements (id, code, name, created_at) VALUES (?, ?, ?, ?)', [entitlement, `${label}-feature`, `${label} feature ${pick(words)}`, time()]);
      for (let i = 0; i < count; i += 1) {
        const customer = uuid();
        const license = uuid();
        const created = time();
        await tx.execute('INSERT INTO customers (id, name, active, created_at, updated_at) VALUES (?, ?, ?, ?, ?)', [
          customer, `${label} ${i} ${pick(words)}`, rng() < 0.9, created, created,
        ]);
        await tx.execute(
          `INSERT INTO licenses (id, license_key, customer_id, type, active, valid_from, valid_until, decryption_key,
             max_machines, floating, lease_hours, metadata, binding, created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [
            license, `${label.toUpperCase()}-${uuid()}`, customer, pick(['time_based', 'usage_based', 'hybrid']), rng() < 0.8,
            '2024-01-01T00:00:00.000Z', '2099-12-31T23:59:59.999Z', rng() < 0.5 ? Buffer.from(Array.from({ length: 32 }, () => Math.floor(rng() * 256))) : null,
            rng() < 0.5 ? null : 1 + Math.floor(rng() * 50), rng() < 0.3, 1 + Math.floor(rng() * 48),
            JSON.stringify({ seat: i, tier: pick(['gold', 'silver']), note: pick(words), nested: { list: [1, 2.5, true, null, pick(words)] } }),
            // Not drawn from rng, so that the rest of the store is what it was before the column.
            i % 3 === 0 ? 'machine-key' : 'hardware-id',
            created, created,
          ],
        );
        await tx.execute('INSERT INTO license_entitlements (license_id, entitlement_id, usage_limit, used) VALUES (?, ?, ?, ?)', [
          license, entitlement, rng() < 0.5 ? null : 1000, Math.floor(rng() * 100),
        ]);
        await tx.execute(
          `INSERT INTO machines (id, license_id, hardware_id, name, client_version, active, first_seen, last_seen, lease_expires_at, offline_until)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          [uuid(), license, `hw-${uuid()}`, rng() < 0.5 ? null : pick(words), '1.2.3', rng() < 0.9, created, time(), null, rng() < 0.5 ? null : time()],
        );
        await tx.execute("INSERT INTO audit_log (occurred_at, actor, action, entity_type, entity_id, details) VALUES (?, ?, 'license.created', 'license', ?, ?)", [
          created, `token:${label}`, license, JSON.stringify({ customer_id: customer, note: pick(words) }),
        ]);
      }
    });
  } finally {
    await db.close();
  }
}
