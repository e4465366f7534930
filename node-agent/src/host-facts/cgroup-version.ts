// Which cgroup hierarchy the host runs, for what it means to tenants: under cgroup v1 the
// kernel charges no container for writes it flushes in the background, which the disk
// throttle then does not hold; socket buffers are held by a limit the agent sets
// (runtime/socket-memory.ts). Under v2 all of it counts against the container
// (docs/security.md, section 10).
import { access } from 'node:fs/promises';
import { join } from 'node:path';

/** 2 when the unified hierarchy is mounted at `root` (it has cgroup.controllers), else 1. */
export async function cgroupVersion(root = '/sys/fs/cgroup'): Promise<1 | 2> {
  return access(join(root, 'cgroup.controllers')).then(
    () => 2 as const,
    () => 1 as const,
  );
}
