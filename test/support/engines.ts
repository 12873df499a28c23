import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { openDatabase } from '../../src/lib/storage/open.js';
import type { Database, Engine } from '../../src/lib/storage/types.js';
import { createTestDatabase, dropTestDatabase, requirePostgres } from './postgres.js';

export interface EngineFixture {
  readonly engine: Engine;
  /** A database URL (SQLite path or postgres:// URL) for an empty store. */
  freshUrl(): Promise<string>;
  /** Opens and migrates a fresh, empty store; closed and removed after the suite. */
  freshDatabase(): Promise<Database>;
}

/**
 * Runs the same suite body against SQLite and PostgreSQL (conventions section 5): one
 * contract, every backend.
 */
export function forEachEngine(title: string, body: (fixture: EngineFixture) => void): void {
  for (const engine of ['sqlite', 'postgres'] as const) {
    describe(`${title} [${engine}]`, function () {
      const cleanups: Array<() => Promise<void>> = [];
      before(async function () {
        if (engine === 'postgres') await requirePostgres(this);
      });
      after(async function () {
        // DROP DATABASE waits for a checkpoint: 0.35-1.1 s each here with the load average at
        // 10, and a suite may have made thirty. Bounded per database, not for the whole lot.
        this.timeout(30_000 + 5_000 * cleanups.length);
        for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
      });
      const fixture: EngineFixture = {
        engine,
        async freshUrl() {
          if (engine === 'sqlite') {
            const dir = mkdtempSync(path.join(tmpdir(), 'license-server-test-'));
            cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
            return path.join(dir, 'data', 'license-server.db');
          }
          const url = await createTestDatabase();
          cleanups.push(() => dropTestDatabase(url));
          return url;
        },
        async freshDatabase() {
          const db = await openDatabase(await fixture.freshUrl());
          cleanups.push(() => db.close());
          return db;
        },
      };
      body(fixture);
    });
  }
}
