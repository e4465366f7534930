// The CPU, memory, /dev/shm, process, disk, disk bandwidth and network limits a task container runs under, as a pure
// function of what the control plane asked for (the SKU catalog's numbers times the
// task's GPUs), what the host has and what the agent keeps for itself. A host smaller
// than the catalog (a dev machine) still runs the task: every limit is clamped to the
// host, and "not asked" (0, an older control plane, replicas) means the host's capacity.

/** What the order asked for; 0 or absent = no number from the control plane. */
export interface TaskResources {
  nanoCpus?: number;
  memoryBytes?: number;
  shmBytes?: number;
  /** Disk the container may fill on the host: its writable layer, volumes, deleted files it holds open. */
  diskBytes?: number;
  /** Network bandwidth, each way, in Mbit/s. */
  networkMbps?: number;
}

/** What the Docker engine reports it has (`docker info` NCPU and MemTotal). */
export interface HostCapacity {
  cpus: number;
  memoryBytes: number;
}

/** Agent settings (SVC_HOST_RESERVED_CPUS, SVC_HOST_RESERVED_MEMORY_MIB, SVC_TASK_PIDS_LIMIT, SVC_TASK_DISK_GIB, SVC_TASK_NETWORK_MBPS). */
export interface LimitSettings {
  /** CPUs no task may use: they stay for the agent, Docker and the OS. */
  reservedCpus: number;
  /** Memory no task may use, for the same reason. */
  reservedMemoryBytes: number;
  pidsLimit: number;
  /** An instance's disk when the order names none (an older control plane). */
  defaultDiskBytes: number;
  /** An instance's bandwidth when the order names none (an older control plane). */
  defaultNetworkMbps: number;
  /** MB/s an instance may read, and as many write, on the disk holding Docker's data, per GPU (none counts one); 0: not limited. */
  diskMBpsPerGpu: number;
  /** I/O operations a second an instance may read, and as many write, on that disk, per GPU (none counts one); 0: not limited. */
  diskIopsPerGpu: number;
}

export interface ContainerLimits {
  nanoCpus: number;
  memoryBytes: number;
  shmBytes: number;
  pidsLimit: number;
  /** Enforced by the agent (tasks/disk-watch.ts), not by Docker: overlay2 can only do it on XFS with project quotas. */
  diskBytes: number;
  /** Each way, shaped by the agent (task-bandwidth.ts); 0: not shaped (replicas, the provider's own). */
  networkMbps: number;
  /** Bytes a second each way on the disk holding Docker's data, throttled by the kernel; 0: not limited (replicas). */
  diskBytesPerSecond: number;
  /** I/O operations a second each way on that disk; 0: not limited (replicas). */
  diskIops: number;
}

export const MIB = 1024 * 1024;
export const GIB = 1024 * MIB;
const NANO = 1_000_000_000;
/** However small the host, a task gets at least half a CPU and 256 MiB: less runs nothing useful. */
const MIN_CPUS = 0.5;
const MIN_MEMORY_BYTES = 256 * MIB;

export const DEFAULT_LIMIT_SETTINGS: LimitSettings = {
  reservedCpus: 1,
  reservedMemoryBytes: 2 * GIB,
  pidsLimit: 4096,
  defaultDiskBytes: 50 * GIB,
  defaultNetworkMbps: 1000,
  diskMBpsPerGpu: 500,
  diskIopsPerGpu: 20_000,
};

const asked = (value: number | undefined): number | null => (value !== undefined && Number.isFinite(value) && value > 0 ? value : null);

/**
 * `kind`: the CPU reserve keeps tenants (instances) off the agent's CPUs; replicas, the
 * provider's own model servers, may use every CPU (CPU-bound engines on a small host
 * would crawl under a quota, and they do not run tenants' code).
 */
export function containerLimits(
  requested: TaskResources | undefined,
  host: HostCapacity,
  settings: LimitSettings,
  kind: 'instance' | 'replica' = 'instance',
  gpus = 0,
): ContainerLimits {
  const reservedCpus = kind === 'instance' ? settings.reservedCpus : 0;
  const maxNanoCpus = Math.round(Math.max(host.cpus - reservedCpus, MIN_CPUS) * NANO);
  const maxMemory = Math.max(host.memoryBytes - settings.reservedMemoryBytes, MIN_MEMORY_BYTES);
  const nanoCpus = Math.min(asked(requested?.nanoCpus) ?? maxNanoCpus, maxNanoCpus);
  const memoryBytes = Math.min(asked(requested?.memoryBytes) ?? maxMemory, maxMemory);
  // /dev/shm is a tmpfs charged to the memory limit, so it can never usefully exceed it;
  // without a number, half the memory (it takes memory only when written).
  const shmBytes = Math.min(asked(requested?.shmBytes) ?? Math.floor(memoryBytes / 2), memoryBytes);
  // Disk is not clamped to the host's free space: that changes by the minute, and the
  // provider sizes hosts for the catalog's disk like for its GPUs.
  const diskBytes = asked(requested?.diskBytes) ?? settings.defaultDiskBytes;
  // Not clamped to the host's link either: the agent cannot know it (a VM reports none).
  const networkMbps = kind === 'instance' ? Math.round(asked(requested?.networkMbps) ?? settings.defaultNetworkMbps) : 0;
  // The disk under every container is one device: each instance gets a share of it that
  // grows with its GPUs, as its CPUs and memory do, so one cannot starve the others' reads
  // and writes (and the pulls, logs and agent state that share it).
  const share = Math.max(gpus, 1);
  const diskBytesPerSecond = kind === 'instance' ? settings.diskMBpsPerGpu * 1_000_000 * share : 0;
  const diskIops = kind === 'instance' ? settings.diskIopsPerGpu * share : 0;
  return { nanoCpus, memoryBytes, shmBytes, pidsLimit: settings.pidsLimit, diskBytes, networkMbps, diskBytesPerSecond, diskIops };
}
