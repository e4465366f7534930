// Runs a TypeScript helper (a server under test) in its own Node process, so the load
// generator and the server each get a core instead of sharing one event loop.
// Contract with the helper: it prints one JSON line on stdout when ready, and exits
// when its stdin closes (so it never outlives the bench, even if the bench is killed).
import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';

export interface BenchChild<T> {
  pid: number;
  /** What the helper printed when it was ready. */
  info: T;
  /** CPU seconds (user + system) the helper and its live child processes (workers) have used so far; null off Linux. */
  cpuSeconds(): number | null;
  /** Asks the helper to exit, then kills it if it lingers. Safe to call twice. */
  stop(): Promise<void>;
}

export interface SpawnOptions {
  /** Extra flags for node itself, e.g. ['--cpu-prof']. */
  nodeArgs?: string[];
  /** Added to the bench's own environment. */
  env?: Record<string, string>;
  readyTimeoutMs?: number;
}

const CLK_TCK = 100; // Linux reports /proc/<pid>/stat times in clock ticks of 1/100 s.

export async function startChild<T>(script: string, options: SpawnOptions = {}): Promise<BenchChild<T>> {
  // `--import tsx` keeps it one process (the tsx CLI would add a wrapper process in between).
  const child = spawn(process.execPath, [...(options.nodeArgs ?? []), '--import', 'tsx', script], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...options.env },
  });
  // If the bench dies without running its cleanup, do not leave a server behind.
  const killOnExit = (): void => {
    child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    process.off('exit', killOnExit);
    if (child.exitCode !== null || child.signalCode !== null) return;
    child.stdin?.end(); // the helper's cue to close its server and exit
    const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
    await exited;
    clearTimeout(timer);
  };

  try {
    const info = await firstJsonLine<T>(child, options.readyTimeoutMs ?? 30_000);
    return { pid: child.pid!, info, cpuSeconds: () => cpuSecondsOf(child.pid!), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

function firstJsonLine<T>(child: ChildProcess, timeoutMs: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! });
    const fail = (err: Error): void => {
      clearTimeout(timer);
      lines.close();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`bench helper printed nothing within ${timeoutMs} ms`)), timeoutMs);
    child.once('exit', (code, signal) => fail(new Error(`bench helper exited before it was ready (code ${code}, signal ${signal})`)));
    lines.once('line', (line) => {
      clearTimeout(timer);
      lines.close();
      // Keep draining stdout so later output cannot fill the pipe and stall the helper.
      child.stdout!.pipe(process.stderr);
      try {
        resolve(JSON.parse(line) as T);
      } catch {
        reject(new Error(`bench helper printed something other than JSON: ${line.slice(0, 200)}`));
      }
    });
  });
}

/** The process and its descendants (a cluster primary's workers), summed. */
function cpuSecondsOf(pid: number): number | null {
  const own = statOf(pid);
  if (own === null) return null;
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = statOf(Number(entry));
    if (stat) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), Number(entry)]);
  }
  let ticks = 0;
  for (const queue = [pid]; queue.length > 0; ) {
    const next = queue.pop()!;
    ticks += statOf(next)?.ticks ?? 0;
    queue.push(...(children.get(next) ?? []));
  }
  return ticks / CLK_TCK;
}

function statOf(pid: number): { ppid: number; ticks: number } | null {
  try {
    // Fields after the ")" of the command name: ppid is the 2nd, utime and stime the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]) };
  } catch {
    return null;
  }
}
