import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';

/**
 * A loopback address that never answers a connection attempt, as a firewall that drops
 * packets does: a listening socket that never accepts, with its accept queue filled, so the
 * kernel drops every further SYN and connect() waits. Node always accepts, hence python3.
 */
export async function startBlackHole(): Promise<{ readonly addr: string; stop(): void }> {
  const script = [
    'import socket, time',
    "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(0)",
    'port = s.getsockname()[1]',
    'fill = []',
    'for _ in range(4):',
    '    c = socket.socket(); c.setblocking(False)',
    "    try: c.connect(('127.0.0.1', port))",
    '    except BlockingIOError: pass',
    '    fill.append(c)',
    'time.sleep(0.2)',
    'print(port, flush=True)',
    'time.sleep(3600)',
  ].join('\n');
  const child: ChildProcess = spawn('python3', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout!, 'data')) as [Buffer];
  const port = Number(line.toString().trim());
  if (!Number.isInteger(port) || port <= 0) throw new Error(`black hole did not start: ${line.toString()}`);
  return { addr: `127.0.0.1:${port}`, stop: () => void child.kill('SIGKILL') };
}
