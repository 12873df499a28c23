import type { Database } from '../storage/types.js';

/**
 * The key-encryption key that goes with an open store, registered by whoever opens it with
 * its settings (storage/open.ts), so that signing code given only the database finds it.
 * Kept apart from protection.ts so that opening a store loads no cipher code.
 */
const keyEncryptionKeys = new WeakMap<Database, Uint8Array>();

export function useKeyEncryptionKey(db: Database, kek: Uint8Array | undefined): void {
  if (kek) keyEncryptionKeys.set(db, kek);
  else keyEncryptionKeys.delete(db);
}

export function keyEncryptionKeyOf(db: Database): Uint8Array | undefined {
  return keyEncryptionKeys.get(db);
}
