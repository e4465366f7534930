// Runs the control plane as a child process (test/support/control-plane-entry.ts) on a
// data dir that outlives it, so a suite can SIGKILL it and start another on the same
// data, the way a crash and a restart go.
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { ROOT } from './node-agent-process.js';

export interface ControlPlaneProcess {
  child: ChildProcess;
  baseUrl: string;
  output(): string;
  /** Resolves with the first stdout JSON line (since start) for which `match` returns a value; fails with the output after `timeoutMs`. */
  line<T>(match: (line: Record<string, unknown>) => T | undefined, timeoutMs?: number): Promise<T>;
  /** SIGKILL, as a crash: nothing is flushed or closed. */
  kill(): Promise<void>;
}

export async function spawnControlPlane(env: Record<string, string>): Promise<ControlPlaneProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'test/support/control-plane-entry.ts')], {
    cwd: ROOT,
    env: { ...process.env, SVC_LOG_LEVEL: 'info', SVC_HTTP_PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const lines: Array<Record<string, unknown>> = [];
  const waiters = new Set<() => void>();
  let partial = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output += chunk.toString();
    partial += chunk.toString();
    const complete = partial.split('\n');
    partial = complete.pop()!;
    for (const text of complete) {
      try {
        lines.push(JSON.parse(text) as Record<string, unknown>);
      } catch {
        continue;
      }
    }
    for (const wake of [...waiters]) wake();
  });
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  const line = <T>(match: (line: Record<string, unknown>) => T | undefined, from = 0, timeoutMs = 20_000): Promise<T> =>
    new Promise((resolve, reject) => {
      let seen = from;
      const timer = setTimeout(() => {
        waiters.delete(look);
        reject(new Error(`the control plane did not print what the test waits for in ${timeoutMs} ms:\n${output.slice(-4000)}`));
      }, timeoutMs);
      const look = (): void => {
        for (; seen < lines.length; seen++) {
          const found = match(lines[seen]!);
          if (found !== undefined) {
            waiters.delete(look);
            clearTimeout(timer);
            return resolve(found);
          }
        }
        if (child.exitCode !== null || child.signalCode !== null) {
          waiters.delete(look);
          clearTimeout(timer);
          reject(new Error(`control plane exited while a test waited for its output:\n${output.slice(-4000)}`));
        }
      };
      waiters.add(look);
      void exited.then(look);
      look();
    });

  // Starting compiles the control plane (tsx); on a busy 2-core host that takes a while.
  const baseUrl = await line((l) => (typeof l.base_url === 'string' ? l.base_url : undefined), 0, 90_000);
  const started = lines.length;
  return {
    child,
    baseUrl,
    output: () => output,
    line: (match, timeoutMs) => line(match, started, timeoutMs),
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}
