// What an instance's image may ask of the node through its config, checked before a
// container is made from it. Docker acts on some of it with the host's resources:
// - each VOLUME is an anonymous volume dockerd fills with a copy of what the image holds
//   at that path, inside the create call, on dockerd's CPU and disk and before the agent
//   can measure anything; nested ones (/usr, /usr/lib, /usr/lib/x86_64-linux-gnu) copy
//   the same files once per level (measured: 325 MiB of /usr written as 651 MiB by one
//   create), so a few levels of a layer of zeros that compresses to megabytes would write
//   terabytes;
// - a WORKDIR under /proc (`/proc/self/fd/7`) started containers in a host directory with
//   runc before 1.1.12 (CVE-2024-21626, "Leaky Vessels"), an escape; no image needs one.
// Replicas, the provider's own images, are not checked.
import { posix } from 'node:path';

/** The most volumes an instance's image may declare (images declare one or two). */
export const MAX_IMAGE_VOLUMES = 32;

export interface ImageConfig {
  Volumes?: Record<string, unknown> | null;
  WorkingDir?: string | null;
}

const clean = (path: string): string => {
  const normal = posix.normalize(`/${path}`);
  return normal.length > 1 && normal.endsWith('/') ? normal.slice(0, -1) : normal;
};

/** Why an instance may not run an image with this config, or null when it may. */
export function imageConfigProblem(config: ImageConfig): string | null {
  const workingDir = config.WorkingDir ? clean(config.WorkingDir) : '';
  if (workingDir === '/proc' || workingDir.startsWith('/proc/')) {
    return `the image's working directory ${config.WorkingDir} is under /proc, which runc let escape the container (CVE-2024-21626); set another WORKDIR`;
  }
  const volumes = [...new Set(Object.keys(config.Volumes ?? {}).map(clean))].sort();
  if (volumes.length > MAX_IMAGE_VOLUMES) return `the image declares ${volumes.length} volumes; an instance's image may declare at most ${MAX_IMAGE_VOLUMES}`;
  for (const outer of volumes) {
    const inner = volumes.find((v) => v !== outer && (outer === '/' || v.startsWith(`${outer}/`)));
    if (inner) {
      return `the image declares the volume ${inner} inside its volume ${outer}: Docker would copy the image's files into each, once per level; declare volumes that do not nest`;
    }
  }
  return null;
}
