#!/usr/bin/env node
// One archive-sized file uploaded through the s3 target's put() beside the AWS SDK's plain
// lib-storage Upload of the same file, in the same run, to the tests' S3 server
// (test/support/s3-server.ts: s3rver behind its SigV4-checking front) on loopback:
//
//   npm run build && node bench/backup.mjs --target s3 [--size-mb 1024] [--rounds 2] [--part-mb 16] [--queue 2]
//
// Both sides use the same client settings (16 MiB parts, 2 in flight, checksums only when
// required, the same timeouts), so the difference is what put() adds: its byte counting,
// its size check and its error mapping. Each upload runs as its own process under
// /usr/bin/time for wall time and peak RSS; the S3 server runs in a process of its own and
// is not counted. Rounds alternate plain and put so that disk and machine noise hit both.
// Goals (issue 26): put at least 0.9x the plain Upload's throughput, peak RSS < 200 MiB.
import { spawn, spawnSync } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { closeSync, createReadStream, mkdtempSync, openSync, rmSync, statSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const MiB = 1024 * 1024;
const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const PART_SIZE = Number(arg('part-mb', '16')) * MiB;
const QUEUE_SIZE = Number(arg('queue', '2'));
const self = fileURLToPath(import.meta.url);
const root = path.resolve(path.dirname(self), '../..');

if (arg('measure')) await measure(arg('measure'));
else await orchestrate();

/** In a child: one upload, `plain` (the SDK's Upload) or `put` (the s3 target). */
async function measure(kind) {
  const { BENCH_ENDPOINT: endpoint, BENCH_REGION: region, BENCH_BUCKET: bucket, BENCH_FILE: file } = process.env;
  const credentials = { accessKeyId: process.env.BENCH_ACCESS_KEY_ID, secretAccessKey: process.env.BENCH_SECRET_ACCESS_KEY };
  const size = statSync(file).size;
  const key = `bench/${kind}.backup.tar.gz.enc`;
  const started = process.hrtime.bigint();
  // As bin/run.js does for the CLI: the SDK's Node 20 notice on stderr, on both sides alike.
  process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
  if (kind === 'plain') {
    const { S3Client } = await import('@aws-sdk/client-s3');
    const { Upload } = await import('@aws-sdk/lib-storage');
    const { NodeHttpHandler } = await import('@smithy/node-http-handler');
    const client = new S3Client({
      endpoint,
      region,
      credentials,
      forcePathStyle: true,
      maxAttempts: 3,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: new NodeHttpHandler({ connectionTimeout: 30_000, socketTimeout: 30_000 }),
    });
    await new Upload({ client, partSize: PART_SIZE, queueSize: QUEUE_SIZE, params: { Bucket: bucket, Key: key, Body: createReadStream(file) } }).done();
    client.destroy();
  } else {
    const { openS3Target } = await import(path.join(root, 'dist/lib/backup/targets/s3.js'));
    const target = openS3Target({ name: 'bench', endpoint, region, bucket, prefix: 'bench', pathStyle: true, credentials, timeoutSeconds: 30, partSize: PART_SIZE, queueSize: QUEUE_SIZE });
    await target.put(`${kind}.backup.tar.gz.enc`, () => createReadStream(file), size);
    await target.close();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  process.stdout.write(`${JSON.stringify({ kind, seconds, bytes: size })}\n`);
}

async function orchestrate() {
  const sizeMiB = Number(arg('size-mb', '1024'));
  const rounds = Number(arg('rounds', '2'));
  const work = mkdtempSync(path.join(process.env.BENCH_DIR ?? tmpdir(), 'license-bench-s3-'));
  const file = path.join(work, 'archive.bin');
  const server = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--input-type=module',
      '-e',
      `import { startS3Server } from ${JSON.stringify(path.join(root, 'test/support/s3-server.ts'))};
       const s3 = await startS3Server();
       await s3.createBucket('bench');
       console.log(JSON.stringify({ endpoint: s3.endpoint, region: s3.region, credentials: s3.credentials }));
       process.stdin.resume();
       process.stdin.on('end', async () => { await s3.stop(); process.exit(0); });`,
    ],
    { cwd: root, stdio: ['pipe', 'pipe', 'inherit'] },
  );
  try {
    const [line] = await new Promise((resolve, reject) => {
      server.once('exit', (code) => reject(new Error(`the S3 server exited (${code})`)));
      server.stdout.once('data', (chunk) => resolve(chunk.toString().split('\n')));
    });
    const { endpoint, region, credentials } = JSON.parse(line);

    // Random bytes, as an encrypted archive is: nothing along the way can compress them.
    const fd = openSync(file, 'w');
    const block = Buffer.alloc(MiB);
    for (let i = 0; i < sizeMiB; i += 1) writeSync(fd, randomFillSync(block));
    closeSync(fd);

    const env = {
      ...process.env,
      BENCH_ENDPOINT: endpoint,
      BENCH_REGION: region,
      BENCH_BUCKET: 'bench',
      BENCH_FILE: file,
      BENCH_ACCESS_KEY_ID: credentials.accessKeyId,
      BENCH_SECRET_ACCESS_KEY: credentials.secretAccessKey,
    };
    const results = { plain: [], put: [] };
    for (let round = 0; round < rounds; round += 1) {
      for (const kind of round % 2 === 0 ? ['plain', 'put'] : ['put', 'plain']) {
        const run = spawnSync('/usr/bin/time', ['-f', '%e %M', process.execPath, self, '--measure', kind, '--part-mb', String(PART_SIZE / MiB), '--queue', String(QUEUE_SIZE)], {
          env,
          cwd: root,
          encoding: 'utf8',
        });
        if (run.status !== 0) throw new Error(`${kind} failed (${run.status}): ${run.stderr.slice(-2000)}`);
        const [wall, kib] = run.stderr.trim().split('\n').pop().split(' ').map(Number);
        const { seconds, bytes } = JSON.parse(run.stdout.trim().split('\n').pop());
        const row = { seconds, wall, mibPerSecond: bytes / MiB / seconds, rssMiB: kib / 1024 };
        results[kind].push(row);
        console.log(`${kind.padEnd(5)} round ${round + 1}: ${seconds.toFixed(2)} s upload (${wall.toFixed(2)} s process), ${row.mibPerSecond.toFixed(1)} MiB/s, peak RSS ${row.rssMiB.toFixed(1)} MiB`);
      }
    }
    const median = (values) => {
      const sorted = [...values].sort((a, b) => a - b);
      const middle = sorted.length / 2;
      return Number.isInteger(middle) ? (sorted[middle - 1] + sorted[middle]) / 2 : sorted[Math.floor(middle)];
    };
    const plain = median(results.plain.map((row) => row.mibPerSecond));
    const put = median(results.put.map((row) => row.mibPerSecond));
    const peak = Math.max(...results.put.map((row) => row.rssMiB));
    const plainPeak = Math.max(...results.plain.map((row) => row.rssMiB));
    console.log(
      `\n${sizeMiB} MiB, ${rounds} round(s), ${PART_SIZE / MiB} MiB parts x ${QUEUE_SIZE} in flight: put ${put.toFixed(1)} MiB/s vs plain Upload ${plain.toFixed(1)} MiB/s = ${(put / plain).toFixed(2)}x (goal >= 0.9); ` +
        `peak RSS put ${peak.toFixed(1)} MiB, plain ${plainPeak.toFixed(1)} MiB (goal < 200)`,
    );
  } finally {
    server.stdin.end();
    await new Promise((resolve) => (server.exitCode === null ? server.once('exit', resolve) : resolve()));
    rmSync(work, { recursive: true, force: true });
  }
}
