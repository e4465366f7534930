// Which cgroup hierarchy the host runs, for what it means to tenants: under cgroup v1 the
// kernel charges no container for its sockets' buffers, so one tenant can fill the
// host-wide TCP and UDP pools (net.ipv4.tcp_mem, udp_mem) and slow every connection on the
// node (docs/security.md, section 10), nor for writes the kernel flushes in the background,
// so the disk throttle does not hold them; under v2 both count against the container.
import { access } from 'node:fs/promises';
import { join } from 'node:path';

/** 2 when the unified hierarchy is mounted at `root` (it has cgroup.controllers), else 1. */
export async function cgroupVersion(root = '/sys/fs/cgroup'): Promise<1 | 2> {
  return access(join(root, 'cgroup.controllers')).then(
    () => 2 as const,
    () => 1 as const,
  );
}
