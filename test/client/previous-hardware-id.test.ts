import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findPreviousHardwareId, type PreviousIdSources } from '../../src/client/previous-hardware-id.js';
import { ClientStore } from '../../src/client/store.js';
import type { Save } from '../../src/client/trust.js';

const HW2 = `hw2-${'a'.repeat(64)}`;
const OLD = `hw1-${'1'.repeat(40)}`;
const DERIVED = `hw1-${'2'.repeat(40)}`;
const save: Save = (write) => write().then(() => true);

/** An unsigned JWS whose payload has this hardware_id: only the claim is read, as a hint. */
const tokenFor = (hardwareId: string) =>
  ['e30', Buffer.from(JSON.stringify({ hardware_id: hardwareId })).toString('base64url'), 'sig'].join('.');

describe('the hw1 ID a client used before (previous-hardware-id.ts)', () => {
  let dir: string;
  let store: ClientStore;
  const sources = (overrides: Partial<PreviousIdSources> = {}): PreviousIdSources => ({
    hardwareId: HW2, derived: true, store, offlineEnabled: true, licenseFile: undefined, deriveHw1: () => DERIVED, ...overrides,
  });
  const record = () => JSON.parse(readFileSync(store.file('hardware-id.json'), 'utf8'));

  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'license-previous-id-'));
    store = new ClientStore(dir, 'KEY');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('takes the cached grace token\'s ID before the hw1 derivation, and pins it in hardware-id.json', async () => {
    await store.writeGrace({ token: tokenFor(OLD), license_id: 'l', entitlements: [], saved_at: '' });
    assert.equal(await findPreviousHardwareId(sources(), save), OLD);
    assert.deepEqual(record(), { hardware_id: HW2, previous_hardware_id: OLD });
    // Later the token is replaced by one for the hw2 ID, and hw1 would derive something else: the record holds.
    await store.writeGrace({ token: tokenFor(HW2), license_id: 'l', entitlements: [], saved_at: '' });
    assert.equal(await findPreviousHardwareId(sources({ deriveHw1: () => `hw1-${'9'.repeat(40)}` }), save), OLD);
  });

  it('takes an hw1 ID this version used (hardware-id.json naming it) before anything else', async () => {
    await store.writeHardwareIds({ hardware_id: OLD });
    await store.writeGrace({ token: tokenFor(`hw1-${'3'.repeat(40)}`), license_id: 'l', entitlements: [], saved_at: '' });
    assert.equal(await findPreviousHardwareId(sources(), save), OLD);
  });

  it('derives hw1 when no state names one, and keeps no state without offline mode', async () => {
    assert.equal(await findPreviousHardwareId(sources(), save), DERIVED);
    rmSync(store.dir, { recursive: true, force: true });
    assert.equal(await findPreviousHardwareId(sources({ offlineEnabled: false }), save), DERIVED);
    assert.equal(await store.has('hardware-id.json'), false);
  });

  it('has none for an ID the application set, for an hw1 ID in use, and takes only hw1-shaped IDs', async () => {
    assert.equal(await findPreviousHardwareId(sources({ derived: false }), save), undefined);
    assert.equal(await findPreviousHardwareId(sources({ hardwareId: DERIVED }), save), undefined);
    await store.writeGrace({ token: tokenFor('custom-machine'), license_id: 'l', entitlements: [], saved_at: '' });
    assert.equal(await findPreviousHardwareId(sources(), save), DERIVED);
  });
});
