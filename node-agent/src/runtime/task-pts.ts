// Each instance's own pseudo-terminals, capped. Docker gives every container a devpts of
// its own, but uncapped, and the kernel counts every devpts's terminals against one table
// for the whole host (kernel.pty.max, 4,096 by default, 1,024 of them kept for the host's
// own /dev/pts). Measured: one container with no capabilities and 512 MiB opened /dev/ptmx
// 3,071 times, after which every other container's `docker exec -t` and `docker run -t`
// failed with "no space left on device", and with them every tenant's interactive SSH
// session on the node. So the agent mounts each instance a devpts with a `max`, on the host,
// before the container is made, and the container binds it over /dev/pts (Docker leaves out
// its own mount where the container names one): the tenant's terminals are never uncapped,
// not even for the first instant. runc points /dev/ptmx at pts/ptmx as it always does.
// Once the container runs, its own mount holds the file system, so the host's is taken
// away (detachPts): nothing stays mounted under the data dir. The empty directory stays
// until the container goes, because Docker mounts a container's binds again to serve its
// archive API (SFTP downloads), and fails when a source is missing.
import { execFile } from 'node:child_process';
import { mkdir, readdir, readFile, rmdir } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface TaskPts {
  /** Where each instance's devpts is mounted, one directory per container (under the agent's data dir). */
  root: string;
  /** Terminals one instance may hold open at once (SVC_TASK_MAX_PTYS). */
  max: number;
}

export const PTS_TARGET = '/dev/pts';

/** The host directory a container's devpts is mounted on. */
export const ptsDir = (root: string, container: string): string => join(root, container);

/**
 * Docker's own /dev/pts options (a fresh instance, terminals owned by group tty and
 * readable by it, anyone may open ptmx, nothing run or setuid from it), plus the cap.
 */
export function devptsOptions(max: number): string {
  return `newinstance,nosuid,noexec,gid=5,mode=0620,ptmxmode=0666,max=${max}`;
}

/** Mount points of devpts file systems in a /proc/self/mountinfo text (octal escapes undone). */
export function devptsMountPoints(mountinfo: string): Set<string> {
  const points = new Set<string>();
  for (const line of mountinfo.split('\n')) {
    const [fields, fsType] = line.split(' - ');
    if (!fields || !fsType?.startsWith('devpts ')) continue;
    const point = fields.split(' ')[4];
    if (point) points.add(point.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(Number.parseInt(octal, 8))));
  }
  return points;
}

const mountedDevpts = async (): Promise<Set<string>> => devptsMountPoints(await readFile('/proc/self/mountinfo', 'utf8'));

/** Mounts the container's capped devpts; one already there (a retried start) is kept. */
export async function mountPts(dir: string, max: number): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  if ((await mountedDevpts()).has(dir)) return;
  try {
    await run('mount', ['-t', 'devpts', '-o', devptsOptions(max), 'devpts', dir]);
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`cannot mount the instance's own /dev/pts on ${dir}: ${stderr || (err as Error).message}`, { cause: err });
  }
}

/** Takes the host's mount away, keeping the directory (a running container keeps its own mount). */
export async function detachPts(dir: string): Promise<void> {
  if ((await mountedDevpts()).has(dir)) await run('umount', [dir]);
}

/** Unmounts and removes a container's devpts directory once the container is gone. */
export async function unmountPts(dir: string): Promise<void> {
  await detachPts(dir);
  await rmdir(dir).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

/** Unmounts every directory under `root` but those of `keep` (containers that still exist): left by a crash. */
export async function sweepPts(root: string, keep: ReadonlySet<string>): Promise<string[]> {
  const names = await readdir(root).catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return [] as string[];
    throw err;
  });
  const swept: string[] = [];
  for (const name of names) {
    if (keep.has(name)) continue;
    await unmountPts(ptsDir(root, name));
    swept.push(name);
  }
  return swept;
}
