import { dropAllTestDatabases } from './postgres.js';
import { killAllServes } from './serve.js';

export async function mochaGlobalTeardown(): Promise<void> {
  killAllServes();
  await dropAllTestDatabases();
}
