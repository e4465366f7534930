// Kernel tables that are one per host and shared by every tenant, raised at start to what
// systemd raises them to at boot (fs.file-max since 240, kernel.pid_max since 243), so each
// tenant's own limits are what bounds it:
// - the open-file table: only processes without CAP_SYS_ADMIN are held to it, every tenant
//   and never the agent or Docker. The kernel's default is about one file per 10 KiB of
//   memory (2.4 million on a 24 GiB host), while a tenant's open files are charged to its
//   own memory limit at about 400 bytes each: an instance of a few GiB could hold the whole
//   table, and every other tenant's open() and socket() would fail with ENFILE;
// - the PID space: the kernel's default is 32,768 on a host of up to 32 CPUs, while every
//   task may hold SVC_TASK_PIDS_LIMIT (4,096) processes and threads: eight fork bombs would
//   leave the agent, Docker and every other tenant unable to start a process.
import { readFile, writeFile } from 'node:fs/promises';

export interface KernelTable {
  /** The sysctl, as logs name it. */
  name: string;
  path: string;
  /** What systemd writes. */
  target: bigint;
}

export const KERNEL_TABLES: readonly KernelTable[] = [
  { name: 'fs.file-max', path: '/proc/sys/fs/file-max', target: 9223372036854775807n },
  { name: 'kernel.pid_max', path: '/proc/sys/kernel/pid_max', target: 4194304n },
];

export type KernelTableOutcome = { name: string } & ({ changed: false; value: string } | { changed: true; from: string; to: string } | { changed: false; error: string });

/** Raises each table to its target when it is lower; says what it found and did. */
export function raiseKernelTables(tables: readonly KernelTable[] = KERNEL_TABLES): Promise<KernelTableOutcome[]> {
  return Promise.all(tables.map(raise));
}

async function raise({ name, path, target }: KernelTable): Promise<KernelTableOutcome> {
  let value: string;
  try {
    value = (await readFile(path, 'utf8')).trim();
  } catch (err) {
    return { name, changed: false, error: (err as Error).message };
  }
  if (BigInt(value) >= target) return { name, changed: false, value };
  try {
    await writeFile(path, String(target));
  } catch (err) {
    return { name, changed: false, error: `it is ${value} and cannot be raised: ${(err as Error).message}` };
  }
  return { name, changed: true, from: value, to: String(target) };
}
