// Whether the Docker engine can attach NVIDIA GPUs. A dev host without the NVIDIA
// container runtime runs task containers without device requests instead of failing.
import type Docker from 'dockerode';

/** True when `docker info` lists a runtime named like "nvidia" (nvidia, nvidia-legacy, ...). */
export async function hasNvidiaRuntime(docker: Pick<Docker, 'info'>): Promise<boolean> {
  return listsNvidiaRuntime((await docker.info()) as { Runtimes?: Record<string, unknown> });
}

/** The same, on a `docker info` answer already at hand. */
export const listsNvidiaRuntime = (info: { Runtimes?: Record<string, unknown> }): boolean =>
  Object.keys(info.Runtimes ?? {}).some((name) => name.toLowerCase().includes('nvidia'));
