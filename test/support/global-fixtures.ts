import { failOnPgOverlap } from './pg-overlap.js';
import { dropAllTestDatabases } from './postgres.js';
import { killAllClis } from './restore-race.js';
import { killAllServes } from './serve.js';

failOnPgOverlap();

export async function mochaGlobalTeardown(): Promise<void> {
  killAllServes();
  killAllClis();
  await dropAllTestDatabases();
}
