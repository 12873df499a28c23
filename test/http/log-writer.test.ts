import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createLogWriter } from '../../src/http/log-writer.js';

describe('the daemon log writer', () => {
  it('writes the lines of one event-loop turn in one write, in order, time and level first', async () => {
    const writes: string[] = [];
    const log = createLogWriter((text) => writes.push(text));
    log({ time: '2026-11-22T10:00:00.000Z', level: 'info', msg: 'request', status: 200 });
    log({ level: 'warn', msg: 'webhook attempt failed', attempt: 2 });
    log({ msg: 'plain', note: 'quote " and newline \n stay on one line' });
    assert.equal(writes.length, 0, 'nothing is written before the turn ends');
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(writes.length, 1);
    const lines = writes[0]!.split('\n');
    assert.equal(lines.pop(), '', 'every line ends with a line feed');
    assert.equal(lines[0], '{"time":"2026-11-22T10:00:00.000Z","level":"info","msg":"request","status":200}');
    const [second, third] = lines.slice(1).map((line) => JSON.parse(line));
    assert.deepEqual(Object.keys(second), ['time', 'level', 'msg', 'attempt']);
    assert.equal(second.level, 'warn');
    assert.deepEqual(Object.keys(third), ['time', 'level', 'msg', 'note']);
    assert.equal(third.level, 'info');
    log({ msg: 'next turn' });
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(writes.length, 2);
  });

  it('writes what is gathered when the process exits in the same turn', () => {
    const module = fileURLToPath(new URL('../../src/http/log-writer.ts', import.meta.url));
    const script = `import { createLogWriter } from ${JSON.stringify(module)};
      const log = createLogWriter();
      for (let i = 0; i < 3; i += 1) log({ msg: 'line', i });
      process.exit(0);`;
    const run = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8' });
    assert.equal(run.status, 0, run.stderr);
    assert.deepEqual(run.stderr.trim().split('\n').map((line) => JSON.parse(line).i), [0, 1, 2]);
  });
});
