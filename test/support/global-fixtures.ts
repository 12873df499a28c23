import { dropAllTestDatabases } from './postgres.js';

export async function mochaGlobalTeardown(): Promise<void> {
  await dropAllTestDatabases();
}
