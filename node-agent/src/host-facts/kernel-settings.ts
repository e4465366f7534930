// Kernel settings that are one per host and that a tenant could otherwise turn against the
// host or the other tenants, set at start:
// - the open-file table, the PID space and the terminal table, raised so each tenant's own
//   limits are what bounds it: the first two to what systemd raises them to at boot
//   (fs.file-max since 240, kernel.pid_max since 243), the third to the kernel's maximum.
//   Only processes without CAP_SYS_ADMIN are held to the open-file table, every tenant and
//   never the agent or Docker; its default is about one file per 10 KiB of memory (2.4
//   million on a 24 GiB host), while a tenant's open files are charged to its own memory
//   limit at about 400 bytes each: an instance of a few GiB could hold the whole table, and
//   every other tenant's open() and socket() would fail with ENFILE. The PID space is 32,768
//   by default on a host of up to 32 CPUs, while every task may hold SVC_TASK_PIDS_LIMIT
//   (4,096) processes and threads: eight fork bombs would leave the agent, Docker and every
//   other tenant unable to start a process. Each instance may hold SVC_TASK_MAX_PTYS
//   terminals (runtime/task-pts.ts), and at the default of 4,096 (3,072 of them for
//   containers) three instances could take them all;
// - the per-user counts of epoll watches and inotify instances and watches, raised to their
//   maximum. Containers run as the host's root (no user namespaces), so each is one count
//   for every tenant, the agent, Docker and systemd together. Each watch is charged to the
//   memory of the container that adds it (about 210 bytes an epoll watch, 90 an inotify
//   watch), but the defaults are reached long before any memory limit: measured, a
//   container of 2 GiB took all 5,491,511 epoll watches of this host, after which every
//   Node process run as root aborted at its next socket (libuv aborts when epoll_ctl
//   fails) and the docker CLI died with "epollctl failed"; the agent would have been first.
//   inotify's 128 instances and 192,536 watches cost a tenant a few MiB. Raised, what
//   bounds each tenant is its memory limit: the same 2 GiB container was OOM-killed inside
//   itself and the host's processes went on;
// - the per-user budget of pipe buffers (fs.pipe-user-pages-soft, 16,384 pages), turned off.
//   Past it, every new pipe of that user holds 8 KiB instead of 64 KiB and cannot be grown,
//   and only processes with CAP_SYS_RESOURCE (the host's, never a tenant's) are spared. It
//   counts what pipes may hold, not what they do: measured, a container of 1.5 MiB took it
//   with 61 empty pipes of 1 MiB and 14 of the default size, after which a `dd | cat` of
//   1 GiB in another container took 5.2 s instead of 0.44 s. What pipes hold is charged to
//   the container that writes it (a 256 MiB container filling pipes was OOM-killed at
//   255 MiB), so without the budget that memory is the bound. Its hard twin
//   (fs.pipe-user-pages-hard, off by default) would refuse new pipes outright, so it is
//   kept off;
// - io_uring, closed to containers (IO_URING below);
// - where core dumps go. A pattern that hands them to a program (`|systemd-coredump`,
//   apport) or, since Linux 6.16, to a socket (`@…`) makes the kernel start that handler on
//   the host, in the host's cgroup, for every process that crashes in any container: a
//   tenant crashing processes in a loop spends the host's CPU (and the handler's disk)
//   outside its quota, and no ulimit the agent sets can stop it (the kernel ignores
//   RLIMIT_CORE for pipes, and a tenant may lower it to the 0 that would not). With `core`
//   the crashing process writes its own dump, into its container, on its own CPU and disk.
import { readFile, writeFile } from 'node:fs/promises';

export interface KernelSetting {
  /** The sysctl, as logs name it. */
  name: string;
  path: string;
  /** What to write, given what is there now; null leaves it. Throws on a value it cannot read. */
  wanted(current: string): string | null;
  /** The log line when the agent changed it. */
  changedMessage: string;
  /** The log line when it needed changing and could not be: what that leaves open. */
  failedMessage: string;
}

const raiseTo =
  (target: bigint) =>
  (current: string): string | null =>
    BigInt(current) < target ? String(target) : null;

const SHARED_TABLE_MESSAGES = {
  changedMessage: 'raised a kernel table all tenants share, so that no tenant can fill it for the others',
  failedMessage: 'a kernel table all tenants share could not be raised: one instance can fill it for the others',
};

/** 0 turns the limit off. */
const turnOff = (current: string): string | null => (BigInt(current) === 0n ? null : '0');

/** The tables and per-user counts every tenant shares, and their targets. */
export const SHARED_TABLES: readonly KernelSetting[] = [
  { name: 'fs.file-max', path: '/proc/sys/fs/file-max', wanted: raiseTo(9223372036854775807n), ...SHARED_TABLE_MESSAGES },
  { name: 'kernel.pid_max', path: '/proc/sys/kernel/pid_max', wanted: raiseTo(4194304n), ...SHARED_TABLE_MESSAGES },
  // NR_UNIX98_PTY_MAX: a terminal costs the container that opens it about 3 KiB of its memory.
  { name: 'kernel.pty.max', path: '/proc/sys/kernel/pty/max', wanted: raiseTo(1048576n), ...SHARED_TABLE_MESSAGES },
  { name: 'fs.epoll.max_user_watches', path: '/proc/sys/fs/epoll/max_user_watches', wanted: raiseTo(9223372036854775807n), ...SHARED_TABLE_MESSAGES },
  { name: 'fs.inotify.max_user_instances', path: '/proc/sys/fs/inotify/max_user_instances', wanted: raiseTo(2147483647n), ...SHARED_TABLE_MESSAGES },
  { name: 'fs.inotify.max_user_watches', path: '/proc/sys/fs/inotify/max_user_watches', wanted: raiseTo(2147483647n), ...SHARED_TABLE_MESSAGES },
  { name: 'fs.pipe-user-pages-soft', path: '/proc/sys/fs/pipe-user-pages-soft', wanted: turnOff, ...SHARED_TABLE_MESSAGES },
  { name: 'fs.pipe-user-pages-hard', path: '/proc/sys/fs/pipe-user-pages-hard', wanted: turnOff, ...SHARED_TABLE_MESSAGES },
];

/**
 * io_uring, for processes with CAP_SYS_ADMIN only (1; 0 lets every process use it). The
 * memory a ring and its registered buffers pin is counted against one per-user budget
 * (RLIMIT_MEMLOCK of the user's locked_vm), and every container is the host's root
 * without CAP_IPC_LOCK: measured, a container that registered 8,184 KiB made every other
 * container's io_uring_setup fail with ENOMEM until it exited. Docker 25 and later refuse
 * io_uring to containers for the same reason; the host's own daemons keep it.
 */
export const IO_URING: KernelSetting = {
  name: 'kernel.io_uring_disabled',
  path: '/proc/sys/kernel/io_uring_disabled',
  wanted: (current) => (current === '0' ? '1' : null),
  changedMessage: 'io_uring is now for processes with CAP_SYS_ADMIN only, which no container holds: the memory it pins is one budget every container shares as root, which one tenant could take for all',
  failedMessage:
    "io_uring stays open to containers (kernel.io_uring_disabled needs Linux 6.6): one tenant can take the per-user budget of memory it pins, and every other container's io_uring, a model server's too, fails with ENOMEM",
};

/**
 * The kernel's out-of-memory report lists every process of the cgroup that ran out
 * (vm.oom_dump_tasks=1, the default): a tenant holding thousands of idle processes and
 * allocating past its limit in a loop wrote 38,277 records (4.9 MB) in 12 s to the host's
 * kernel log, overwriting what the host logged and costing journald CPU and disk outside
 * any limit. Off, each kill is a few lines; the agent reports the kill from the container
 * (Docker's OOMKilled).
 */
export const OOM_REPORTS: KernelSetting = {
  name: 'vm.oom_dump_tasks',
  path: '/proc/sys/vm/oom_dump_tasks',
  wanted: (current) => (current === '0' ? null : '0'),
  changedMessage: "out-of-memory reports no longer list every process of the container: a tenant looping out of memory with thousands of processes had flooded the host's kernel log",
  failedMessage: "out-of-memory reports list every process of the container: a tenant looping out of memory can flood the host's kernel log",
};

/** Whether the kernel hands a crashing process's dump to a handler on the host (a pipe or a socket) rather than to a file the process writes itself. */
export function dumpsGoToTheHost(corePattern: string): boolean {
  return corePattern.startsWith('|') || corePattern.startsWith('@');
}

/** The kernel's own default: `core`, in the crashing process's working directory. */
export const CONTAINED_CORE_PATTERN = 'core';

export const CORE_PATTERN: KernelSetting = {
  name: 'kernel.core_pattern',
  path: '/proc/sys/kernel/core_pattern',
  wanted: (current) => (dumpsGoToTheHost(current) ? CONTAINED_CORE_PATTERN : null),
  changedMessage:
    'core dumps were handed to a program on the host, which the kernel would start outside the quota of every container a process crashes in; they are now written by the crashing process, inside its container (SVC_CONTAINER_CORE_DUMPS=false keeps the host pattern)',
  failedMessage: "core dumps go to a program on the host: a tenant crashing processes in a loop spends the host's CPU outside its quota",
};

/** Whether this host's pattern hands dumps to the host (false when it cannot be read). */
export async function corePatternGoesToTheHost(): Promise<boolean> {
  return dumpsGoToTheHost(await readFile(CORE_PATTERN.path, 'utf8').catch(() => ''));
}

/** What the agent sets at start, under its configuration. */
export function kernelSettingsFor(options: { containerCoreDumps: boolean }): KernelSetting[] {
  return options.containerCoreDumps ? [...SHARED_TABLES, IO_URING, OOM_REPORTS, CORE_PATTERN] : [...SHARED_TABLES, IO_URING, OOM_REPORTS];
}

export type KernelSettingOutcome = { setting: KernelSetting } & (
  | { changed: false; value: string }
  | { changed: true; from: string; to: string }
  | { changed: false; error: string }
);

/** Sets each setting that needs it; says what it found and did. */
export function applyKernelSettings(settings: readonly KernelSetting[]): Promise<KernelSettingOutcome[]> {
  return Promise.all(settings.map(apply));
}

async function apply(setting: KernelSetting): Promise<KernelSettingOutcome> {
  let value: string;
  let wanted: string | null;
  try {
    value = (await readFile(setting.path, 'utf8')).trim();
    wanted = setting.wanted(value);
  } catch (err) {
    return { setting, changed: false, error: (err as Error).message };
  }
  if (wanted === null) return { setting, changed: false, value };
  try {
    await writeFile(setting.path, wanted);
  } catch (err) {
    return { setting, changed: false, error: `it is ${value} and cannot be changed: ${(err as Error).message}` };
  }
  return { setting, changed: true, from: value, to: wanted };
}
