import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { deriveHardwareId, deriveHardwareIdV1 } from '../../src/client/hardware-id.js';
import { collectAttributesV2, deriveHardwareIdV2, machineAppSpecificId, MACHINE_APP_ID } from '../../src/client/hardware-id-v2.js';
import { fileURLToPath } from 'node:url';
import { asUser } from '../support/cli.js';
import { buildTree, hardwareVectors } from '../support/hardware-tree.js';

describe('hardware ID hw2 (test/vectors/hardware-id-v2.json)', () => {
  const vectors = hardwareVectors();
  let work: string;
  before(() => {
    // A directory whose name holds "usb" must not make every device of the tree a USB one.
    work = mkdtempSync(path.join(tmpdir(), 'usb-hardware-id-'));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('uses the vectors\' application id', () => {
    assert.equal(vectors.machine_app_id.replaceAll('-', ''), MACHINE_APP_ID);
  });

  it('turns machine ids into application-specific ids as the vectors say', () => {
    for (const { machine_id, app_specific_id } of vectors.machine_app_specific) {
      assert.equal(machineAppSpecificId(machine_id) ?? null, app_specific_id, machine_id);
    }
  });

  it('computes the application-specific id exactly as systemd does (systemd-id128, where installed)', function () {
    const systemd = spawnSync('systemd-id128', ['machine-id', `--app-specific=${MACHINE_APP_ID}`], { encoding: 'utf8' });
    if (systemd.status !== 0) this.skip();
    assert.equal(machineAppSpecificId(readFileSync('/etc/machine-id', 'utf8').trim()), systemd.stdout.trim());
  });

  vectors.trees.forEach((tree, i) => {
    it(`derives the vector's attributes and ID: ${tree.name}`, () => {
      const root = path.join(work, `tree-${i}`);
      buildTree(root, tree);
      assert.deepEqual(collectAttributesV2(root), tree.attributes);
      assert.equal(deriveHardwareIdV2(root) ?? null, tree.hardware_id);
    });
  });

  it('holds still where hw1 moves: the laptop before and after its network changed has one ID', () => {
    const [before, after] = vectors.trees;
    assert.ok(before!.hardware_id && before!.hardware_id === after!.hardware_id);
  });

  it('never lets the raw machine id out, only its application-specific form', () => {
    const tree = vectors.trees[0]!;
    const root = path.join(work, 'raw');
    buildTree(root, tree);
    const raw = tree.files['etc/machine-id']!.trim();
    const lines = collectAttributesV2(root);
    assert.ok(lines.some((line) => line.startsWith('machine-app-id=')));
    assert.ok(!`${lines.join('\n')}${deriveHardwareIdV2(root)}`.includes(raw));
  });

  it('is the same for root and for another user: nothing root-only (the DMI product UUID, 0400) is read', function () {
    const prefix = asUser('nobody', {});
    if (!prefix) this.skip();
    const tree = vectors.trees[0]!;
    assert.ok(tree.files['sys/class/dmi/id/product_uuid'], 'the laptop tree has a product UUID to leave out');
    const root = path.join(work, 'privileges');
    buildTree(root, tree);
    chmodSync(work, 0o755);
    spawnSync('chmod', ['-R', 'a+rX', root]);
    chmodSync(path.join(root, 'sys/class/dmi/id/product_uuid'), 0o400);
    const built = fileURLToPath(new URL('../../dist/client/hardware-id-v2.js', import.meta.url));
    const script = `import(${JSON.stringify(built)}).then((m) => console.log(m.deriveHardwareIdV2(${JSON.stringify(root)})))`;
    const [command, ...args] = [...prefix!, process.execPath, '-e', script];
    const asNobody = spawnSync(command!, args, { encoding: 'utf8' });
    assert.equal(asNobody.status, 0, asNobody.stderr);
    assert.equal(asNobody.stdout.trim(), deriveHardwareIdV2(root));
    assert.equal(asNobody.stdout.trim(), tree.hardware_id);
  });

  it('is the client\'s default on Linux; hw1 stays derivable and unchanged', function () {
    const v2 = deriveHardwareIdV2('/');
    if (process.platform !== 'linux' || v2 === undefined) {
      assert.equal(deriveHardwareId(), deriveHardwareIdV1());
      return;
    }
    assert.match(v2, /^hw2-[0-9a-f]{64}$/);
    assert.equal(deriveHardwareId(), v2);
    assert.equal(deriveHardwareId('hw1'), deriveHardwareIdV1());
    assert.match(deriveHardwareIdV1(), /^hw1-[0-9a-f]{40}$/);
  });
});
