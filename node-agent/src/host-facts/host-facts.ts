// What the host is, reported once per session: CPU, memory, disks, OS and kernel through
// systeminformation, the Docker engine (version, and whether it has the NVIDIA runtime to
// attach GPUs) through dockerode, and the NVIDIA driver and CUDA versions from NVML.
// A missing Docker engine or NVML is a fact ("" / nvml_available=false with the reason),
// reported and logged, not an error.
import Docker from 'dockerode';
import si from 'systeminformation';
import type { HostFacts } from '@svc/proto';
import type { Logger } from '@svc/shared';
import type { Nvml } from 'node-nvml-bindings';
import { hasNvidiaRuntime } from '../runtime/nvidia-runtime.js';

/** File systems that are not the host's storage. */
const PSEUDO_FILESYSTEMS = new Set(['tmpfs', 'devtmpfs', 'overlay', 'squashfs', 'proc', 'sysfs', 'nsfs', 'ramfs', 'efivarfs']);
const DOCKER_TIMEOUT_MS = 3_000;

export interface DockerFacts {
  version: string;
  nvidiaRuntime: boolean;
}

export interface HostFactsSources {
  nvml: Nvml;
  hostname: string;
  agentVersion: string;
  log: Logger;
  /** Overridable for tests; defaults to the local engine's socket. */
  docker?: () => Promise<DockerFacts>;
}

export async function collectHostFacts(sources: HostFactsSources): Promise<HostFacts> {
  const [cpu, mem, disks, os, docker] = await Promise.all([
    si.cpu(),
    si.mem(),
    si.fsSize(),
    si.osInfo(),
    (sources.docker ?? (() => dockerFacts(new Docker())))().catch((err: unknown) => {
      sources.log.info({ err: (err as Error).message }, 'no Docker engine answers; reporting none');
      return { version: '', nvidiaRuntime: false };
    }),
  ]);
  const { nvml } = sources;
  return {
    hostname: sources.hostname,
    cpu_model: [cpu.manufacturer, cpu.brand].filter(Boolean).join(' '),
    cpu_cores: cpu.cores,
    cpu_physical_cores: cpu.physicalCores,
    memory_total_bytes: mem.total,
    disks: disks
      .filter((d) => !PSEUDO_FILESYSTEMS.has(d.type) && d.size > 0)
      .map((d) => ({ mount: d.mount, size_bytes: d.size, used_bytes: d.used })),
    os: [os.distro, os.release].filter(Boolean).join(' '),
    kernel: os.kernel,
    docker_version: docker.version,
    nvidia_runtime: docker.nvidiaRuntime,
    nvidia_driver_version: nvml.available ? (nvml.driverVersion() ?? '') : '',
    cuda_version: nvml.available ? (nvml.cudaVersion() ?? '') : '',
    nvml_available: nvml.available,
    nvml_unavailable_reason: nvml.unavailableReason ?? '',
    agent_version: sources.agentVersion,
  };
}

/** The engine's version and whether it can hand GPUs to containers. Rejects when no engine answers. */
export async function dockerFacts(docker: Docker): Promise<DockerFacts> {
  const timeout = new Promise<never>((_, reject) => {
    setTimeout(() => reject(new Error(`the Docker engine did not answer within ${DOCKER_TIMEOUT_MS} ms`)), DOCKER_TIMEOUT_MS).unref();
  });
  const [version, nvidiaRuntime] = await Promise.race([Promise.all([docker.version(), hasNvidiaRuntime(docker)]), timeout]);
  return { version: version.Version, nvidiaRuntime };
}
