// Which host pids the agent may signal for a tenant (SSH `signal` requests, hangups of
// dropped sessions). Docker reports an exec's host pid as 0 until the process runs, and
// kill(0) signals the agent's own process group; a pid read from /proc may also have
// been reused. So a pid is signalled only when it is an integer > 1, is not the agent,
// and lives in the container's PID namespace (which is never the agent's).
import { readlink } from 'node:fs/promises';

export interface PidFacts {
  pid: number;
  agentPid: number;
  /** `pid:[…]` of the pid's namespace; undefined when the process is gone. */
  pidNamespace: string | undefined;
  /** The namespace of the container's init; undefined when the container is not running. */
  containerNamespace: string | undefined;
  agentNamespace: string;
}

export type SignalVerdict = { send: true } | { send: false; reason: string };

/** Pure: may a signal go to this pid? */
export function signalVerdict(f: PidFacts): SignalVerdict {
  if (!Number.isInteger(f.pid) || f.pid <= 1) return { send: false, reason: `pid ${f.pid} is not a process of the instance (not started yet)` };
  if (f.pid === f.agentPid) return { send: false, reason: 'that is the agent itself' };
  if (f.containerNamespace === undefined) return { send: false, reason: 'the container is not running' };
  if (f.containerNamespace === f.agentNamespace) return { send: false, reason: 'the container shares the host PID namespace; its processes cannot be told apart' };
  if (f.pidNamespace === undefined) return { send: false, reason: `pid ${f.pid} is gone` };
  if (f.pidNamespace !== f.containerNamespace) return { send: false, reason: `pid ${f.pid} is not in the container` };
  return { send: true };
}

/** The PID namespace of a process (`pid:[4026532301]`), or undefined when it is gone. */
export async function pidNamespaceOf(pid: number, procRoot = '/proc'): Promise<string | undefined> {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    return await readlink(`${procRoot}/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}

let agentNamespace: Promise<string> | undefined;

/** The agent's own PID namespace (read once). */
export function ownPidNamespace(): Promise<string> {
  agentNamespace ??= readlink('/proc/self/ns/pid').catch(() => 'unknown');
  return agentNamespace;
}

/** The verdict for `pid` against the container whose init is `containerInitPid`, read from /proc. */
export async function checkPid(pid: number, containerInitPid: number | undefined): Promise<SignalVerdict> {
  const [pidNamespace, containerNamespace, agentNs] = await Promise.all([
    pidNamespaceOf(pid),
    containerInitPid !== undefined && containerInitPid > 1 ? pidNamespaceOf(containerInitPid) : Promise.resolve(undefined),
    ownPidNamespace(),
  ]);
  return signalVerdict({ pid, agentPid: process.pid, pidNamespace, containerNamespace, agentNamespace: agentNs });
}
