import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CLI, ok, runCli } from '../support/cli.js';

/**
 * Runs the CLI on a pseudo-terminal of `columns` columns (python3's pty: node-pty is not a
 * dependency), standard output and error both on it; returns all it wrote and the exit code.
 */
function onTerminal(columns: number, args: string[], env: Record<string, string>): { code: number; output: string } {
  const script = [
    'import fcntl, os, pty, struct, sys, termios',
    'pid, fd = pty.fork()',
    'if pid == 0:',
    '    os.execv(sys.argv[1], sys.argv[1:])',
    "fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack('HHHH', 24, int(os.environ['PTY_COLUMNS']), 0, 0))",
    'out = b""',
    'while True:',
    '    try:',
    '        data = os.read(fd, 65536)',
    '    except OSError:',
    '        break',
    '    if not data:',
    '        break',
    '    out += data',
    'sys.stdout.buffer.write(out)',
    'sys.exit(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))',
  ].join('\n');
  const clean: Record<string, string> = {};
  for (const [name, value] of Object.entries(process.env)) if (value !== undefined && !name.startsWith('LICENSE_')) clean[name] = value;
  const run = spawnSync('python3', ['-c', script, process.execPath, CLI, ...args], { env: { ...clean, ...env, PTY_COLUMNS: String(columns) }, encoding: 'utf8' });
  return { code: run.status ?? -1, output: run.stdout };
}

// eslint-disable-next-line no-control-regex
const visible = (text: string) => text.replace(/\u001b\[[0-9;?]*[A-Za-z]/g, '');

describe('the progress spinner (src/cli/progress.ts)', function () {
  this.timeout(60_000);
  let work: string;
  let env: Record<string, string>;
  before(async () => {
    work = mkdtempSync(path.join(tmpdir(), 'license-progress-'));
    env = { LICENSE_DATA_DIR: path.join(work, 'data'), LICENSE_BACKUP_ENCRYPTION_KEY: 'ef'.repeat(32) };
    ok(await runCli(['init'], { env }));
  });
  after(() => rmSync(work, { recursive: true, force: true }));

  it('draws on a terminal of 80 columns', () => {
    const run = onTerminal(80, ['backup', 'create'], env);
    assert.equal(run.code, 0, run.output);
    assert.match(visible(run.output), /Backing up/);
    assert.match(visible(run.output), /^created backup \S+: .*, encrypted, verified \(\S+\)\r?$/m);
  });

  it('prints no column of single characters on a terminal of 0 columns: just the summary line', () => {
    const run = onTerminal(0, ['backup', 'create'], env);
    assert.equal(run.code, 0, run.output);
    const lines = visible(run.output).split(/\r?\n/).filter((line) => line.trim() !== '');
    assert.equal(lines.length, 1, JSON.stringify(run.output.slice(0, 400)));
    assert.match(lines[0]!, /^created backup \S+: .*, encrypted, verified \(\S+\)$/);
  });
});
