import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { ReplicaLag } from '../../../src/lib/replication/replica-lag.js';
import { Replicator } from '../../../src/lib/replication/replicator.js';

const GENERATION = '0123456789abcdef';
const at = (offset: number, generation = GENERATION) => ({ generation, index: 0, offset });

/**
 * A stand-in for Litestream 0.3 that writes and logs as it does (the lines replica-position.ts
 * reads), at a steady write rate: every 300 ms the shadow WAL grows and is logged synced, and
 * the replica is uploaded to where the shadow was two syncs before. The replica follows 0.6 s
 * behind and is never level with the database when serve looks.
 */
const FAKE_LITESTREAM = `
const fs = require('node:fs');
const path = require('node:path');
if (process.argv[2] === 'version') { console.log('v0.3.13'); process.exit(0); }
const config = fs.readFileSync(process.argv[process.argv.indexOf('-config') + 1], 'utf8');
const db = /- path: "?([^"\\n]+?)"?\\n/.exec(config)[1];
const meta = path.join(path.dirname(db), '.' + path.basename(db) + '-litestream');
const wal = path.join(meta, 'generations', '${GENERATION}', 'wal');
fs.mkdirSync(wal, { recursive: true });
fs.writeFileSync(path.join(meta, 'generation'), '${GENERATION}');
const log = (line) => process.stderr.write(JSON.stringify(line) + '\\n');
log({ level: 'INFO', msg: 'replica sync: calc new pos', replica: 'offsite', position: '${GENERATION}/00000000:0' });
const sizes = [0];
let uploaded = 0;
setInterval(() => {
  sizes.push(sizes.at(-1) + 100);
  fs.appendFileSync(path.join(wal, '00000000.wal'), Buffer.alloc(100));
  log({ level: 'INFO', msg: 'sync: ok' });
  const to = sizes.at(-3) ?? 0;
  if (to > uploaded) {
    log({ level: 'DEBUG', msg: 'wal segment written', replica: 'offsite', position: '${GENERATION}/00000000:' + uploaded, sz: to - uploaded });
    uploaded = to;
  }
}, 300);
`;

describe('replication lag (replication/replica-lag.ts)', function () {
  it('counts from the oldest look the replica does not hold, so a replica that follows steadily stays a look behind, not ever further', () => {
    const lag = new ReplicaLag();
    for (let second = 0; second <= 100; second += 1) {
      lag.observe(second * 1000, at(second * 100));
      // The replica holds what the database had two seconds before.
      const replica = at(Math.max(0, (second - 2) * 100));
      assert.equal(lag.behindSince(replica), (second === 0 ? undefined : Math.max(1, second - 1) * 1000), `second ${second}`);
      lag.forget([replica]);
    }
  });

  it('keeps the time a replica that holds nothing new fell behind, however long, and starts anew with a generation', () => {
    const lag = new ReplicaLag();
    lag.observe(0, at(100));
    const stuck = at(100);
    for (let second = 1; second <= 5000; second += 1) {
      lag.observe(second * 1000, at(100 + second));
      lag.forget([stuck]);
    }
    assert.equal(lag.behindSince(stuck), 1000, 'the oldest look stays past the looks kept');
    assert.equal(lag.behindSince(at(100 + 5000)), undefined);
    lag.observe(6_000_000, at(10, 'fedcba9876543210'));
    assert.equal(lag.behindSince(at(10, 'fedcba9876543210')), undefined);
    assert.equal(lag.behindSince(stuck), 6_000_000, 'a replica of the old generation lacks the new one from its start');
  });

  it('a replicator whose Litestream writes steadily reports a lag of a second or two, not the time since it first fell behind', async function () {
    this.timeout(30_000);
    const work = mkdtempSync(path.join(tmpdir(), 'license-replica-lag-'));
    const binary = path.join(work, 'litestream');
    writeFileSync(binary, `#!${process.execPath}\n${FAKE_LITESTREAM}`);
    chmodSync(binary, 0o755);
    const replicator = await Replicator.prepare({
      databasePath: path.join(work, 'db.sqlite'),
      settings: { targets: [{ name: 'offsite', kind: 'file', path: path.join(work, 'offsite'), allowUnencrypted: true, timeoutSeconds: 30, retention: {} }], syncIntervalMs: 1000, snapshotIntervalMs: 3_600_000, retentionMs: 86_400_000, litestream: binary },
      backupKey: undefined,
      environment: { PATH: process.env.PATH },
      parentPid: process.pid,
      log: () => undefined,
    });
    try {
      replicator.start();
      const lags: number[] = [];
      for (let second = 0; second < 8; second += 1) {
        await new Promise((resolve) => setTimeout(resolve, 1000));
        const replica = replicator.status().replicas[0]!;
        if (replica.lag_seconds !== null) lags.push(replica.lag_seconds);
      }
      assert.ok(lags.length >= 5, `lags seen: ${lags.join(', ')}`);
      assert.ok(lags.every((lag) => lag <= 2.5), `the lag stays a look or two: ${lags.join(', ')} s`);
      assert.ok(lags.some((lag) => lag > 0), `the replica was seen behind: ${lags.join(', ')} s`);
    } finally {
      await replicator.stop();
      rmSync(work, { recursive: true, force: true });
    }
  });
});
