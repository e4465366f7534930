// Three of the kernel's resource counts are kept per user for the whole host: real-time
// signals queued (RLIMIT_SIGPENDING), bytes of POSIX message queues (RLIMIT_MSGQUEUE) and
// shared memory locked with SHM_LOCK (RLIMIT_MEMLOCK). Containers run as the host's root
// with no user namespace, so every tenant, every model server and the host's own root
// processes add to one count each, and a process is refused once that count passes its
// *own* limit. Measured with Docker's defaults (every container inherits 96,365 signals,
// 800 KiB of queues): one instance queueing signals to itself until refused left every
// other container, and the host, unable to create a POSIX timer or queue a signal, and a
// multithreaded program's setuid() then dropped privileges in its calling thread only
// (glibc tells the other threads with a real-time signal, which could not be queued); one
// instance's message queues left none for anyone until it was removed.
//
// So a container's limit decides both what it can take and whether it can be starved:
// - unlimited, it is never refused (the count is kernel memory each holder pays for out
//   of its own memory limit). Every container gets that where the host lets it: a
//   container cannot raise a hard limit above what runc inherits from containerd (runc
//   sets them without CAP_SYS_RESOURCE), so containerd must run with these limits
//   unlimited. The agent raises them on the running containerd at start (prlimit, as it
//   sets the kernel settings in kernel-settings.ts); a containerd restarted later starts
//   with its service's limits again, so a host should also set LimitSIGPENDING=,
//   LimitMSGQUEUE= and LimitMEMLOCK=infinity for docker and containerd (and
//   scripts/setup-host.sh starts dockerd so);
// - otherwise instances get a limit far below the host's default, so no instance can take
//   the count from the agent, Docker, the model servers or the host; instances can then
//   still starve each other, which the agent reports (isolation warning shared_rlimits).
import { execFile } from 'node:child_process';
import { readdir, readFile } from 'node:fs/promises';

export type SharedRlimit = 'sigpending' | 'msgqueue' | 'memlock';

interface RlimitRow {
  name: SharedRlimit;
  /** How /proc/<pid>/limits names it. */
  line: string;
  /** An instance's limit where the host cannot give unlimited; undefined: Docker's default is kept. */
  bounded: number | undefined;
}

export const SHARED_RLIMITS: readonly RlimitRow[] = [
  // Far below the 96,365 a host of this size gives root, and ample for programs that use them.
  { name: 'sigpending', line: 'Max pending signals', bounded: 1_024 },
  // A tenth of the default 800 KiB: ten queues of the default size.
  { name: 'msgqueue', line: 'Max msgqueue size', bounded: 81_920 },
  // Lowered, it would break programs that pin memory (CUDA, RDMA); its default (8 MiB) is kept.
  { name: 'memlock', line: 'Max locked memory', bounded: undefined },
];

/** Docker's HostConfig.Ulimits entry; -1 is unlimited. */
export interface Ulimit {
  Name: SharedRlimit;
  Soft: number;
  Hard: number;
}

/** The hard limits in a /proc/<pid>/limits text: a number, 'unlimited', or undefined when the line is missing. */
export function hardLimits(text: string): Partial<Record<SharedRlimit, number | 'unlimited'>> {
  const out: Partial<Record<SharedRlimit, number | 'unlimited'>> = {};
  for (const row of SHARED_RLIMITS) {
    const line = text.split('\n').find((l) => l.startsWith(row.line));
    // "Max pending signals       96365                96365                signals"
    const hard = line?.slice(row.line.length).trim().split(/\s+/)[1];
    if (hard === 'unlimited') out[row.name] = 'unlimited';
    else if (hard !== undefined && /^\d+$/.test(hard)) out[row.name] = Number(hard);
  }
  return out;
}

/** The limits a container of `kind` gets, given which ones the host lets containers have unlimited. */
export function containerUlimits(kind: 'instance' | 'replica', unlimited: ReadonlySet<SharedRlimit>): Ulimit[] {
  const out: Ulimit[] = [];
  for (const row of SHARED_RLIMITS) {
    if (unlimited.has(row.name)) out.push({ Name: row.name, Soft: -1, Hard: -1 });
    // A model server keeps the host's default: above what any instance can reach.
    else if (kind === 'instance' && row.bounded !== undefined) out.push({ Name: row.name, Soft: row.bounded, Hard: row.bounded });
  }
  return out;
}

/**
 * Which of the shared limits every containerd on this host has unlimited (what runc, and
 * so every container it starts, inherits). Empty when no containerd is found (an engine on
 * another host): the bounded limits are safe anywhere.
 */
export async function unlimitedForContainers(proc = '/proc'): Promise<Set<SharedRlimit>> {
  const found: Array<Partial<Record<SharedRlimit, number | 'unlimited'>>> = [];
  for (const pid of await containerdPids(proc)) {
    const text = await readFile(`${proc}/${pid}/limits`, 'utf8').catch(() => undefined);
    if (text !== undefined) found.push(hardLimits(text));
  }
  const unlimited = new Set<SharedRlimit>();
  if (found.length === 0) return unlimited;
  for (const row of SHARED_RLIMITS) if (found.every((limits) => limits[row.name] === 'unlimited')) unlimited.add(row.name);
  return unlimited;
}

async function containerdPids(proc: string): Promise<number[]> {
  const pids: number[] = [];
  for (const pid of await readdir(proc).catch(() => [] as string[])) {
    if (!/^\d+$/.test(pid)) continue;
    const comm = await readFile(`${proc}/${pid}/comm`, 'utf8').catch(() => '');
    if (comm.trim() === 'containerd') pids.push(Number(pid));
  }
  return pids;
}

/**
 * Raises the shared limits of every running containerd to unlimited (util-linux prlimit;
 * the agent runs as root), so the containers started from now on may have them unlimited.
 * Returns what it could not raise, with why; empty when all went (or no containerd runs here).
 */
export async function raiseForContainers(proc = '/proc'): Promise<string[]> {
  const failures: string[] = [];
  const args = SHARED_RLIMITS.map((row) => `--${row.name}=unlimited:unlimited`);
  for (const pid of await containerdPids(proc)) {
    await new Promise<void>((resolve) => {
      execFile('prlimit', [`--pid=${pid}`, ...args], (err, _stdout, stderr) => {
        if (err) failures.push(`containerd (pid ${pid}): ${stderr.trim() || err.message}`);
        resolve();
      });
    });
  }
  return failures;
}
