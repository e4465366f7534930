// Processes of an exec session on the host, through /proc: the session's process and
// everything it started that still descends from it. The agent runs in the host's PID
// namespace, where Docker reports exec PIDs, so no tool is needed inside the container.
import { readdir, readFile } from 'node:fs/promises';

/** Parent PID from a /proc/<pid>/stat line; the command name may hold spaces and parentheses. */
export function parentPidOf(statLine: string): number | undefined {
  const close = statLine.lastIndexOf(')');
  if (close === -1) return undefined;
  const fields = statLine.slice(close + 2).split(' ');
  const ppid = Number(fields[1]);
  return Number.isInteger(ppid) ? ppid : undefined;
}

/** The state letter of a /proc/<pid>/stat line (R, S, D, Z, X, ...). */
export function stateOf(statLine: string): string | undefined {
  const close = statLine.lastIndexOf(')');
  return close === -1 ? undefined : statLine.slice(close + 2, close + 3) || undefined;
}

/**
 * Whether process `pid` has ended: gone, or a zombie its parent has not reaped yet (its
 * namespaces already went with it, while its /proc entry stays).
 */
export async function processEnded(pid: number, procRoot = '/proc'): Promise<boolean> {
  try {
    const state = stateOf(await readFile(`${procRoot}/${pid}/stat`, 'utf8'));
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

/** `root` and its descendants, children after their parents, from a pid -> parent map. */
export function descendants(root: number, parents: ReadonlyMap<number, number>): number[] {
  const children = new Map<number, number[]>();
  for (const [pid, ppid] of parents) {
    const list = children.get(ppid);
    if (list) list.push(pid);
    else children.set(ppid, [pid]);
  }
  const out: number[] = [];
  const queue = [root];
  const seen = new Set<number>();
  while (queue.length > 0) {
    const pid = queue.shift()!;
    if (seen.has(pid)) continue;
    seen.add(pid);
    out.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return out;
}

export async function readParents(procRoot = '/proc'): Promise<Map<number, number>> {
  const parents = new Map<number, number>();
  for (const name of await readdir(procRoot)) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const ppid = parentPidOf(await readFile(`${procRoot}/${name}/stat`, 'utf8'));
      if (ppid !== undefined) parents.set(Number(name), ppid);
    } catch {
      // The process ended between readdir and read: it is not in the tree any more.
    }
  }
  return parents;
}

/** The live tree under `root` (root included when it lives); empty when root is gone. */
export async function processTree(root: number, procRoot = '/proc'): Promise<number[]> {
  const parents = await readParents(procRoot);
  return parents.has(root) ? descendants(root, parents) : [];
}

/**
 * Sends `signal` to each pid; a process that is already gone is not an error. Pids of 1
 * or less are skipped whatever the caller thinks: 0 and negative pids name process
 * groups (kill(0) is the agent's own), 1 is the host's init.
 */
export function signalAll(pids: readonly number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    if (!Number.isInteger(pid) || pid <= 1) continue;
    try {
      process.kill(pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
  }
}
