// Holds every instance to its disk limit (runtime/task-limits.ts). Docker can only cap a
// writable layer on overlay2 over XFS with project quotas, which most hosts do not have,
// so the agent does what Kubernetes' kubelet does for ephemeral storage: it measures each
// instance's containers in turn (runtime `diskUsage`) and stops one found over its limit,
// saying why. A tenant who fills the disk would otherwise stop every other tenant's
// containers, pulls and the agent itself from writing.
import type { Logger } from '@svc/shared';
import { LABEL_DISK_LIMIT } from '../runtime/container-spec.js';
import { formatBytes, type DiskUsage } from '../runtime/disk-usage.js';
import { DEFAULT_LIMIT_SETTINGS } from '../runtime/task-limits.js';
import { isRuntimeError, type TaskHandle } from '../runtime/runtime.js';

export interface DiskWatchSettings {
  /** Pause between two passes over every watched container (SVC_TASK_DISK_CHECK_MS). */
  intervalMs: number;
  /** For a container without the limit label (made by an agent before this one): SVC_TASK_DISK_GIB. */
  defaultLimitBytes: number;
  /** Files (inodes) one instance may hold on that disk (SVC_TASK_MAX_FILES). */
  maxFiles: number;
  /** How long a pass waits for one container's measuring before it goes on (see MEASURE_WAIT_MS). */
  measureWaitMs?: number;
}

export const DEFAULT_DISK_WATCH_SETTINGS: DiskWatchSettings = { intervalMs: 10_000, defaultLimitBytes: DEFAULT_LIMIT_SETTINGS.defaultDiskBytes, maxFiles: 5_000_000 };

/**
 * A pass goes on to the next container once one's measuring has taken this long; that one
 * is judged whenever its measuring ends, and not measured again meanwhile. The engine
 * answers nothing about a container whose lock is held (Docker 20.10 holds it while an
 * archive of it streams, for as long as the reader takes): one instance would otherwise
 * hold up the measuring of every other on the node.
 */
export const MEASURE_WAIT_MS = 30_000;

const WHERE = '(files written in the container, its volumes and deleted files still open)';

/**
 * A container whose measurement took longer than a tenth of the interval is measured again
 * only after ten times what it took. Walking a container's files costs the agent's CPU, not
 * the tenant's: 500,000 files in an instance took 1.4 s of `du` a pass here (its two walks,
 * cached; 7.5 s uncached), so an instance holding the 5 million it may would keep a host
 * core busy for nothing it pays if measured every 10 s, and hold up the measuring of every
 * other instance behind it. cAdvisor backs off its `du` the same
 * way. The host's own disk-pressure watch still covers the disk meanwhile.
 */
export const MEASURE_PACE = 10;

/** Why an instance must stop, or null while it is within its limits. */
export function diskVerdict(used: DiskUsage, limit: DiskUsage): string | null {
  if (used.bytes > limit.bytes) {
    return `stopped by its node: the instance used ${formatBytes(used.bytes)} of disk, over its limit of ${formatBytes(limit.bytes)} ${WHERE}`;
  }
  if (used.files > limit.files) {
    return `stopped by its node: the instance held ${used.files.toLocaleString('en-US')} files on disk, over its limit of ${limit.files.toLocaleString('en-US')} ${WHERE}`;
  }
  return null;
}

/** The limit the runtime wrote on the container; the default when absent or unreadable. */
export function limitOf(handle: Pick<TaskHandle, 'labels'>, defaultLimitBytes: number): number {
  const value = Number(handle.labels[LABEL_DISK_LIMIT]);
  return Number.isSafeInteger(value) && value > 0 ? value : defaultLimitBytes;
}

interface Watched {
  containerId: string;
  limit: DiskUsage;
  /** When (on `now`'s clock) it may be measured again; 0: at the next pass. */
  dueAt: number;
  /** Set while a measuring is under way (one a pass stopped waiting for). */
  measuring?: Promise<void>;
}

export class DiskWatch {
  private readonly watched = new Map<string, Watched>();
  private timer: NodeJS.Timeout | null = null;
  private pass: Promise<void> | null = null;
  private stopped = false;

  constructor(
    private readonly measure: (containerId: string) => Promise<DiskUsage>,
    /** Called once for an instance found over its limit; it is no longer watched. */
    private readonly over: (taskId: string, message: string) => void,
    private readonly log: Pick<Logger, 'warn'>,
    private readonly settings: DiskWatchSettings = DEFAULT_DISK_WATCH_SETTINGS,
    /** Milliseconds, for what a measurement took. */
    private readonly now: () => number = () => performance.now(),
  ) {}

  watch(taskId: string, handle: Pick<TaskHandle, 'containerId' | 'labels'>): void {
    this.watched.set(taskId, { containerId: handle.containerId, limit: { bytes: limitOf(handle, this.settings.defaultLimitBytes), files: this.settings.maxFiles }, dueAt: 0 });
    this.schedule();
  }

  forget(taskId: string): void {
    this.watched.delete(taskId);
  }

  /** Agent shutdown: no further passes (containers keep running; the next agent watches them). */
  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }

  /** One pass over every watched container that is due, one at a time so the disk is walked by one `du` at once. */
  async checkAll(): Promise<void> {
    const waitMs = this.settings.measureWaitMs ?? MEASURE_WAIT_MS;
    for (const [taskId, entry] of [...this.watched]) {
      if (this.watched.get(taskId) !== entry || entry.measuring || entry.dueAt > this.now()) continue;
      const measuring = this.measureOne(taskId, entry);
      entry.measuring = measuring;
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), waitMs)));
      const finished = await Promise.race([measuring.then(() => true), waited]);
      clearTimeout(timer);
      if (!finished) this.log.warn({ task: taskId, waitedMs: waitMs }, 'measuring the disk an instance uses is taking long (is its container locked?); going on with the others');
    }
  }

  private async measureOne(taskId: string, entry: Watched): Promise<void> {
    const started = this.now();
    let used: DiskUsage;
    try {
      used = await this.measure(entry.containerId);
      const took = this.now() - started;
      entry.dueAt = took * MEASURE_PACE > this.settings.intervalMs ? this.now() + took * MEASURE_PACE : 0;
    } catch (err) {
      if (isRuntimeError(err, 'not_found')) this.forget(taskId);
      else this.log.warn({ err, task: taskId }, 'could not measure the disk an instance uses');
      return;
    } finally {
      entry.measuring = undefined;
    }
    const message = diskVerdict(used, entry.limit);
    if (message && this.watched.get(taskId) === entry) {
      this.forget(taskId);
      this.over(taskId, message);
    }
  }

  private schedule(): void {
    if (this.timer || this.pass || this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.pass = this.checkAll().finally(() => {
        this.pass = null;
        if (this.watched.size > 0) this.schedule();
      });
    }, this.settings.intervalMs);
    this.timer.unref();
  }
}
