// Docker create options for a task (an instance or a model-server replica), as a pure
// function. Every container carries labels naming its task and node, so a restarted
// agent re-adopts what runs and removes what nobody wants. Never privileged, never the
// Docker socket; GPUs go in as device requests by UUID when the NVIDIA runtime exists.
// Tenants are hostile (docs/security.md): each container sits alone on its own network
// (task-network.ts), under CPU, memory, /dev/shm, pids and disk limits (task-limits.ts), with
// only the capabilities a GPU workload needs, and the kernel's OOM killer picks it first.
import type { ContainerCreateOptions } from 'dockerode';
import { limitedCommand, LOG_INIT_TARGET, type ImageCommand, type LogLimit } from './log-init.js';
import { containerLimits, type ContainerLimits, type HostCapacity, type LimitSettings, type TaskResources } from './task-limits.js';
import { networkName } from './task-network.js';
import { PTS_TARGET, ptsDir, type TaskPts } from './task-pts.js';
import type { BlockDevice } from '../host-facts/block-device.js';
import { containerUlimits, type SharedRlimit } from '../host-facts/shared-rlimits.js';
import { INSTANCE_CGROUP_PARENT } from './socket-memory.js';

export const LABEL_INSTANCE = 'svc.instance';
export const LABEL_REPLICA = 'svc.replica';
export const LABEL_NODE = 'svc.node';
/** Replicas: the whole TaskSpec as JSON, so a restarted agent can restart a re-adopted replica. */
export const LABEL_SPEC = 'svc.spec';
/** An instance's authorized SSH keys, one per line: the SSH gateway reads them back after an agent restart. */
export const LABEL_SSH_KEYS = 'svc.ssh-authorized-keys';
/** Instances: the disk limit in bytes, so a restarted agent keeps enforcing it on a re-adopted container. */
export const LABEL_DISK_LIMIT = 'svc.disk-limit-bytes';
/** An instance's bandwidth each way (Mbit/s), for what the kernel's shaping does not see (the SSH gateway). */
export const LABEL_NETWORK_LIMIT = 'svc.network-mbps';
/** User labels ride along under this prefix so they cannot collide with ours. */
export const USER_LABEL_PREFIX = 'svc.label.';
/**
 * The labels the agent reads a task's settings back from. Docker merges an image's labels
 * under the container's, so each is always written, empty when the task has none: an
 * image labelled with an SSH key would otherwise let its author into every instance made
 * from it without keys of its own.
 */
export const SETTING_LABELS = [LABEL_SPEC, LABEL_SSH_KEYS, LABEL_DISK_LIMIT, LABEL_NETWORK_LIMIT] as const;

export interface TaskSpec {
  taskId: string;
  kind: 'instance' | 'replica';
  image: string;
  gpuUuids: string[];
  env?: Record<string, string>;
  labels?: Record<string, string>;
  command?: string[];
  /** A TCP port inside the container to publish on `hostIp` with a port Docker picks (replicas). */
  publish?: { containerPort: number; hostIp: string };
  /** Replicas: the HTTP path the agent health-checks on the published port. */
  healthPath?: string;
  sshAuthorizedKeys?: string[];
  /** Limits the control plane asked for (SKU catalog); clamped to the host, see task-limits.ts. */
  resources?: TaskResources;
}

export interface HostCapabilities {
  nodeId: string;
  /** Docker has the NVIDIA runtime, so device requests can attach GPUs. */
  nvidiaRuntime: boolean;
  /** CPUs and memory the engine reports, which every limit is clamped to. */
  capacity: HostCapacity;
  limits: LimitSettings;
  /** The log limiter that instances' commands run behind (log-init.ts); absent: Docker runs them as is. */
  logLimit?: LogLimit;
  /** Instances' own capped /dev/pts (task-pts.ts); absent: Docker's uncapped one. */
  pts?: TaskPts;
  /** The disk holding Docker's data (host-facts/block-device.ts); absent: disk bandwidth is not limited. */
  disk?: BlockDevice;
  /** cgroup v1 under cgroupfs: the agent makes instances' memory cgroups with a TCP limit (socket-memory.ts). */
  socketLimits?: boolean;
  /** The per-user kernel limits containers may have unlimited here (host-facts/shared-rlimits.ts); absent: none. */
  unlimitedRlimits?: ReadonlySet<SharedRlimit>;
}

/**
 * What an instance may not read of the host's /proc and /sys: Docker 20.10's own list (it
 * replaces it when one is given), plus what leaks the host and its neighbours: the power
 * meters (RAPL's energy counters, a side channel root-only on the host since
 * CVE-2020-8694, which later Docker releases mask too), the interrupt counts of every
 * device (a neighbour's GPU and NVMe interrupts say when it works) and the machine's DMI
 * serials and UUID.
 */
export const INSTANCE_MASKED_PATHS: readonly string[] = [
  '/proc/asound',
  '/proc/acpi',
  '/proc/kcore',
  '/proc/keys',
  '/proc/latency_stats',
  '/proc/timer_list',
  '/proc/timer_stats',
  '/proc/sched_debug',
  '/proc/scsi',
  '/sys/firmware',
  '/sys/devices/virtual/powercap',
  '/proc/interrupts',
  '/sys/devices/virtual/dmi',
];

/**
 * Everything else is dropped: no raw sockets (NET_RAW: ARP spoofing, ping floods), no
 * device nodes (MKNOD), no file capabilities (SETFCAP/SETPCAP), no chroot, no audit
 * writes. What stays is what package managers, pip, Jupyter and CUDA programs running as
 * root inside the container use: file ownership and modes, switching users, signals, low ports.
 */
export const KEPT_CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID', 'SETUID', 'SETGID', 'KILL', 'NET_BIND_SERVICE'] as const;

/**
 * Docker's default json-file log has no size limit, so a task printing without end would
 * fill the host's disk through the engine, outside anything the disk watch counts.
 * Rotated: at most 3 x 10 MB of a container's latest output stays on the host.
 */
export const LOG_CONFIG = { Type: 'json-file', Config: { 'max-size': '10m', 'max-file': '3' } } as const;

/** Positive: under memory pressure the kernel kills tenant processes (instances first) before the agent or Docker. */
export const OOM_SCORE_ADJ = { instance: 800, replica: 500 } as const;

/**
 * Written over a tenant's image: the NVIDIA runtime reads these from the container's
 * environment, the image's included, and would hand the container devices every tenant of
 * the host shares. `enabled` gives it the host's InfiniBand devices (NVIDIA_MOFED, raw RDMA
 * on the provider's fabric), its NVSwitches (NVIDIA_NVSWITCH), GPUDirect Storage and
 * GDRCopy; a channel list gives it IMEX channels (memory shared across a multi-node NVLink
 * domain). `void` is the runtime's word for none.
 */
export const SHARED_DEVICES_OFF = ['NVIDIA_MOFED=disabled', 'NVIDIA_NVSWITCH=disabled', 'NVIDIA_GDS=disabled', 'NVIDIA_GDRCOPY=disabled', 'NVIDIA_IMEX_CHANNELS=void'] as const;

export const containerName = (task: Pick<TaskSpec, 'kind' | 'taskId'>): string => `svc-${task.kind}-${task.taskId}`;

/** `image`: the image's own command, which an instance behind the log limiter needs. */
export function buildContainerSpec(task: TaskSpec, host: HostCapabilities, image?: ImageCommand): ContainerCreateOptions {
  const labels: Record<string, string> = {
    ...Object.fromEntries(SETTING_LABELS.map((key) => [key, ''])),
    [task.kind === 'instance' ? LABEL_INSTANCE : LABEL_REPLICA]: task.taskId,
    [LABEL_NODE]: host.nodeId,
  };
  for (const [k, v] of Object.entries(task.labels ?? {})) labels[USER_LABEL_PREFIX + k] = v;
  if (task.kind === 'replica') labels[LABEL_SPEC] = JSON.stringify(task);
  if (task.sshAuthorizedKeys && task.sshAuthorizedKeys.length > 0) labels[LABEL_SSH_KEYS] = task.sshAuthorizedKeys.join('\n');

  const env = Object.entries(task.env ?? {}).map(([k, v]) => `${k}=${v}`);
  // Without the NVIDIA runtime (a dev host) the container runs without GPUs; say which it was given.
  env.push(`SVC_GPU_UUIDS=${task.gpuUuids.join(',')}`);
  // Always set, over the image's: CUDA images carry NVIDIA_VISIBLE_DEVICES=all, which a host
  // whose default runtime is NVIDIA's honours, so a container given no GPU would see them all.
  // `void` is the runtime's word for none at all.
  const gpus = host.nvidiaRuntime && task.gpuUuids.length > 0;
  env.push(`NVIDIA_VISIBLE_DEVICES=${gpus ? task.gpuUuids.join(',') : 'void'}`);
  if (task.kind === 'instance') env.push(...SHARED_DEVICES_OFF);

  const port = task.publish ? `${task.publish.containerPort}/tcp` : undefined;
  const limits = containerLimits(task.resources, host.capacity, host.limits, task.kind, task.gpuUuids.length);
  if (task.kind === 'instance') labels[LABEL_DISK_LIMIT] = String(limits.diskBytes);
  if (limits.networkMbps > 0) labels[LABEL_NETWORK_LIMIT] = String(limits.networkMbps);
  // Tenants only: a replica is the provider's own model server.
  const limited = task.kind === 'instance' && host.logLimit && image ? limitedCommand(image, task.command, host.logLimit) : null;
  const mounts: NonNullable<NonNullable<ContainerCreateOptions['HostConfig']>['Mounts']> = [];
  const ulimits = containerUlimits(task.kind, host.unlimitedRlimits ?? new Set());
  if (limited) mounts.push({ Type: 'bind', Source: host.logLimit!.path, Target: LOG_INIT_TARGET, ReadOnly: true });
  if (task.kind === 'instance' && host.pts) mounts.push({ Type: 'bind', Source: ptsDir(host.pts.root, containerName(task)), Target: PTS_TARGET });
  return {
    name: containerName(task),
    Image: task.image,
    ...(limited ?? (task.command && task.command.length > 0 ? { Cmd: task.command } : {})),
    Env: env,
    Labels: labels,
    StopSignal: 'SIGTERM',
    // The image's HEALTHCHECK is off: Docker would run it as an exec as often as the image
    // says (1 ms is allowed), and each exec costs dockerd, containerd and runc CPU outside
    // the container's limits (measured: one such container kept a core of the host busy).
    // The agent checks a replica itself; an instance's health is its GPUs' and its process's.
    Healthcheck: { Test: ['NONE'] },
    ...(port ? { ExposedPorts: { [port]: {} } } : {}),
    HostConfig: {
      Privileged: false,
      SecurityOpt: ['no-new-privileges'],
      // The agent restarts replicas itself (with backoff, reporting each restart), never Docker.
      RestartPolicy: { Name: 'no' },
      Binds: [],
      ...(mounts.length > 0 ? { Mounts: mounts } : {}),
      LogConfig: { Type: LOG_CONFIG.Type, Config: { ...LOG_CONFIG.Config } },
      NetworkMode: networkName(task),
      CapDrop: ['ALL'],
      CapAdd: [...KEPT_CAPABILITIES],
      NanoCpus: limits.nanoCpus,
      Memory: limits.memoryBytes,
      // Equal to Memory: no swap on top of the limit.
      MemorySwap: limits.memoryBytes,
      ShmSize: limits.shmBytes,
      PidsLimit: limits.pidsLimit,
      // Counts the kernel keeps per user for the whole host (see shared-rlimits.ts).
      ...(ulimits.length > 0 ? { Ulimits: ulimits } : {}),
      ...diskThrottle(limits, host.disk),
      // The agent makes this cgroup, with its TCP limit, before the start (socket-memory.ts).
      ...(task.kind === 'instance' && host.socketLimits ? { CgroupParent: INSTANCE_CGROUP_PARENT } : {}),
      OomScoreAdj: OOM_SCORE_ADJ[task.kind],
      // The networks carry IPv4 only; without IPv6 not even a link-local route to the host exists.
      Sysctls: { 'net.ipv6.conf.all.disable_ipv6': '1' },
      ...(task.kind === 'instance' ? { MaskedPaths: [...INSTANCE_MASKED_PATHS] } : {}),
      // HostPort '' lets Docker pick a free port; the agent reads it back with inspect.
      ...(port ? { PortBindings: { [port]: [{ HostIp: task.publish!.hostIp, HostPort: '' }] } } : {}),
      ...(gpus
        ? { DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: task.gpuUuids, Capabilities: [['gpu']] }] }
        : {}),
    },
  };
}

/**
 * The kernel's throttle on the disk holding Docker's data, each way. Under cgroup v1 it
 * holds reads and direct writes; buffered writes are flushed by the kernel's own threads,
 * outside the container's group, and only cgroup v2 charges them to it.
 */
function diskThrottle(limits: ContainerLimits, disk: BlockDevice | undefined): Partial<NonNullable<ContainerCreateOptions['HostConfig']>> {
  if (!disk) return {};
  const rate = (value: number) => [{ Path: disk.path, Rate: value }];
  return {
    ...(limits.diskBytesPerSecond > 0 ? { BlkioDeviceReadBps: rate(limits.diskBytesPerSecond), BlkioDeviceWriteBps: rate(limits.diskBytesPerSecond) } : {}),
    ...(limits.diskIops > 0 ? { BlkioDeviceReadIOps: rate(limits.diskIops), BlkioDeviceWriteIOps: rate(limits.diskIops) } : {}),
  };
}

/** The inverse of the labels above: which task a container belongs to, null when none. */
export function taskFromLabels(labels: Record<string, string> | undefined): Pick<TaskSpec, 'kind' | 'taskId'> | null {
  const instance = labels?.[LABEL_INSTANCE];
  if (instance) return { kind: 'instance', taskId: instance };
  const replica = labels?.[LABEL_REPLICA];
  if (replica) return { kind: 'replica', taskId: replica };
  return null;
}

/** The TaskSpec a replica container was created from (LABEL_SPEC); null when absent or unreadable. */
export function taskSpecFromLabels(labels: Record<string, string> | undefined): TaskSpec | null {
  const text = labels?.[LABEL_SPEC];
  if (!text) return null;
  try {
    const spec = JSON.parse(text) as TaskSpec;
    const task = taskFromLabels(labels);
    const ok = typeof spec.image === 'string' && Array.isArray(spec.gpuUuids) && task !== null && spec.taskId === task.taskId && spec.kind === task.kind;
    return ok ? spec : null;
  } catch {
    // Someone else's label value: not a spec we wrote.
    return null;
  }
}
