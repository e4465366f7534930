// How much of the host's disk a container holds, counted the way the disk fills: blocks
// allocated, not file sizes (a sparse file takes none), and files (inodes: a file system
// holds only so many, and a million empty files fill it as surely as bytes do). Three
// places, because a tenant who knows the first would use the others:
// - the writable layer (overlay2's upper directory) and the container's volumes (an image
//   may declare a VOLUME; Docker then makes one on the host), walked with `du`;
// - files the container's processes deleted but still hold open: no directory shows them,
//   yet they take space until closed, so they are read from /proc/<pid>/fd.
// The agent runs as root in the host's PID namespace (docs/node-agent.md), which is what
// lets it read both. Kubernetes' kubelet measures a pod's ephemeral storage the same way
// where the file system has no project quotas.
import { execFile } from 'node:child_process';
import { opendir, readlink, stat, statfs } from 'node:fs/promises';
import type Docker from 'dockerode';

export interface DiskUsage {
  bytes: number;
  files: number;
}

/** `du` over many paths (one process): blocks in bytes, a file linked twice counted once. Missing paths count 0. */
export function allocatedBytes(paths: readonly string[]): Promise<number> {
  return du(['-B1'], paths);
}

/** Files, directories and links under the paths (inodes; `du --inodes`). Missing paths count 0. */
export function fileCount(paths: readonly string[]): Promise<number> {
  return du(['--inodes'], paths);
}

function du(unit: string[], paths: readonly string[]): Promise<number> {
  if (paths.length === 0) return Promise.resolve(0);
  return new Promise((resolve, reject) => {
    // -x: never into another file system mounted below (the container's are not mounted
    // there, but a host's could be). `--`: paths come from Docker, never options.
    execFile('du', ['-s', '-x', ...unit, '--', ...paths], { maxBuffer: 1 << 20 }, (err, stdout) => {
      // du exits 1 when one path vanished meanwhile (a volume removed) but prints the rest.
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') return reject(new Error('du is not installed on this host'));
      resolve(sumFirstColumn(stdout));
    });
  });
}

/** du's output: "<bytes>\t<path>" per line. */
export function sumFirstColumn(text: string): number {
  let total = 0;
  for (const line of text.split('\n')) {
    const bytes = Number.parseInt(line, 10);
    if (Number.isFinite(bytes)) total += bytes;
  }
  return total;
}

/**
 * Descriptors read per container and pass. A tenant can hold millions open; reading them all
 * would cost the agent that much memory and time every pass. Deleted files hidden past this
 * still fill the disk, which then shows as disk pressure (host-facts/disk-pressure.ts).
 */
export const MAX_DESCRIPTORS_READ = 262_144;

/**
 * Deleted files that `pids` hold open on the file systems `devices` (by st_dev:
 * the container's root and its volumes; not its tmpfs, whose pages count as memory). Each
 * file counts once however many descriptors share it. Processes that end meanwhile are skipped.
 */
export async function deletedOpenFiles(pids: readonly number[], devices: ReadonlySet<number>): Promise<DiskUsage> {
  const seen = new Set<string>();
  let total = 0;
  let budget = MAX_DESCRIPTORS_READ;
  for (const pid of pids) {
    if (budget <= 0) break;
    const dir = `/proc/${pid}/fd`;
    let fds: AsyncIterable<{ name: string }>;
    try {
      // Streamed, never listed whole: see MAX_DESCRIPTORS_READ.
      fds = await opendir(dir, { bufferSize: 256 });
    } catch {
      continue;
    }
    for await (const { name: fd } of iterateSafely(fds)) {
      if (--budget < 0) break;
      try {
        if (!(await readlink(`${dir}/${fd}`)).endsWith(' (deleted)')) continue;
        const st = await stat(`${dir}/${fd}`, { bigint: true });
        if (!devices.has(Number(st.dev))) continue;
        const key = `${st.dev}:${st.ino}`;
        if (seen.has(key)) continue;
        seen.add(key);
        total += Number(st.blocks) * 512;
      } catch {
        // The descriptor was closed between readdir and now.
      }
    }
  }
  return { bytes: total, files: seen.size };
}

/** A process that exits mid-listing ends its listing, not the measurement. */
async function* iterateSafely<T>(entries: AsyncIterable<T>): AsyncGenerator<T> {
  try {
    for await (const entry of entries) yield entry;
  } catch {
    // ENOENT/ESRCH from /proc: the process is gone.
  }
}

/** st_dev of each path that exists (a container's root through /proc/<pid>/root, volume directories). */
export async function devicesOf(paths: readonly string[]): Promise<Set<number>> {
  const devices = new Set<number>();
  for (const path of paths) {
    try {
      devices.add(Number((await stat(path, { bigint: true })).dev));
    } catch {
      // Gone meanwhile: nothing open there to count.
    }
  }
  return devices;
}

/** Where the engine keeps images, layers, volumes and logs (`docker info` DockerRootDir). */
export const dockerRootDir = async (docker: Docker): Promise<string> => ((await docker.info()) as { DockerRootDir: string }).DockerRootDir;

export interface FileSystemUsage {
  sizeBytes: number;
  usedBytes: number;
  /** Inodes; 0 total where the file system sets no limit (btrfs). */
  filesTotal: number;
  filesUsed: number;
}

/** The file system holding `path`, as df shows it: blocks reserved for root count as used. */
export async function fileSystemUsage(path: string): Promise<FileSystemUsage> {
  const fs = await statfs(path);
  const sizeBytes = fs.blocks * fs.bsize;
  return { sizeBytes, usedBytes: sizeBytes - fs.bavail * fs.bsize, filesTotal: fs.files, filesUsed: fs.files - fs.ffree };
}

const UNITS = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'] as const;

/** 1536 -> "1.5 KiB": sizes in messages a tenant or operator reads. */
export function formatBytes(bytes: number): string {
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${UNITS[unit]}`;
}
