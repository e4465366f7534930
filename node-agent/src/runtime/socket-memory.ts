// Socket buffers charged to the instance that fills them, on cgroup v1 hosts. Under v1 the
// kernel charges a container's socket buffers to it only when its memory cgroup has a TCP
// limit (memory.kmem.tcp.limit_in_bytes), and only for sockets made after that limit was
// set; the charge then covers UDP's buffers too (measured). Docker 20.10 no longer sets
// one. Unset, a container held to 256 MiB queued 2.2 GiB in TCP sockets it never read and
// as much in UDP ones (measured), pushing the host's TCP pool (net.ipv4.tcp_mem) past its
// maximum, where the kernel grants no socket more buffer, the other tenants', the agent's
// and the model servers' alike (one run measured a transfer between two host processes at
// 20.8 s instead of 0.11 s; another, at 0.14 s). So the
// agent makes the container's memory cgroup itself, between create and start (runc then
// uses it as it is), with the limit set: there is no instant at which a process of the
// container runs without it. The container names its cgroup parent (Docker's default,
// /docker) so that the agent knows the path whatever the daemon's own default. The limit
// is the container's memory limit, the same bound cgroup v2 puts on socket buffers
// (there they count against memory.max). Only with Docker's cgroupfs driver: under
// systemd's, the cgroup is a systemd scope the agent cannot make ahead of it.
import { access, mkdir, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';

export const V1_MEMORY_ROOT = '/sys/fs/cgroup/memory';
/** The cgroup parent instances name when the agent limits their sockets (Docker's default under cgroupfs). */
export const INSTANCE_CGROUP_PARENT = '/docker';
const TCP_LIMIT_FILE = 'memory.kmem.tcp.limit_in_bytes';

/** What `docker info` says about cgroups. */
export interface EngineCgroups {
  CgroupVersion?: string;
  CgroupDriver?: string;
}

/** Whether the agent must set TCP limits itself: cgroup v1, Docker's cgroupfs driver, a kernel with the v1 TCP counter. */
export async function needsSocketLimits(info: EngineCgroups, root = V1_MEMORY_ROOT): Promise<boolean> {
  if (info.CgroupVersion !== '1' || info.CgroupDriver !== 'cgroupfs') return false;
  return access(join(root, TCP_LIMIT_FILE)).then(
    () => true,
    () => false,
  );
}

/** Where runc puts the memory cgroup of a container whose cgroup parent is INSTANCE_CGROUP_PARENT. */
export function memoryCgroupOf(containerId: string, root = V1_MEMORY_ROOT): string {
  return join(root, INSTANCE_CGROUP_PARENT, containerId);
}

/** Makes the container's memory cgroup, before it starts, with its TCP buffers limited to `bytes`. */
export async function limitSocketMemory(containerId: string, bytes: number, root = V1_MEMORY_ROOT): Promise<void> {
  const dir = memoryCgroupOf(containerId, root);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, TCP_LIMIT_FILE), String(bytes));
}

/** Takes away the cgroup made for a container that never ran (runc removes those of containers that did); none there is fine. */
export async function releaseSocketCgroup(containerId: string, root = V1_MEMORY_ROOT): Promise<void> {
  await rmdir(memoryCgroupOf(containerId, root)).catch(() => undefined);
}

/**
 * A running container adopted from an agent that did not make its cgroup (an upgrade):
 * its TCP limit set now, where its cgroup is; sockets it already holds stay uncounted, new
 * ones count. False when its cgroup is not there (another cgroup parent, cgroup v2).
 */
export async function limitRunningSocketMemory(containerId: string, bytes: number, root = V1_MEMORY_ROOT): Promise<boolean> {
  const file = join(memoryCgroupOf(containerId, root), TCP_LIMIT_FILE);
  try {
    await access(file);
    await writeFile(file, String(bytes));
    return true;
  } catch {
    return false;
  }
}
