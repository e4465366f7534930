// Disk pressure, as kubelet has it: the disk holding Docker's data (images, writable
// layers, volumes, logs) is nearly full, so the node must take no new task until it is
// not. The limits on each instance, the image cap and image collection keep a tenant from
// getting here alone; this is the last line when they were not enough (a layer that
// expands far beyond its compressed size, writes between two disk checks, the provider's
// own files). The agent reports it in its host facts, at once when it changes, and the
// control plane places nothing on a node under pressure (node-status.ts there). A pull
// measures it every second and stops when it comes, since an image's layer is what can
// expand that far.
import type { HostFacts } from '@svc/proto';
import { fileSystemUsage } from '../runtime/disk-usage.js';
import type { Logger } from '@svc/shared';

export interface DockerDisk {
  /** Docker's data root (`docker info` DockerRootDir). */
  mount: string;
  sizeBytes: number;
  usedBytes: number;
  /** Inodes: a million empty files fill a file system without taking bytes. */
  filesTotal: number;
  filesUsed: number;
  pressure: boolean;
}

/** The HostFacts fields (protocol 5); none without a Docker engine. */
export function dockerDiskFacts(disk: DockerDisk | null): Pick<HostFacts, 'docker_disk' | 'disk_pressure'> {
  if (!disk) return {};
  return {
    docker_disk: { mount: disk.mount, size_bytes: disk.sizeBytes, used_bytes: disk.usedBytes, files_total: disk.filesTotal, files_used: disk.filesUsed },
    disk_pressure: disk.pressure,
  };
}

export function underPressure(usedBytes: number, sizeBytes: number, thresholdPercent: number): boolean {
  return sizeBytes > 0 && (usedBytes / sizeBytes) * 100 >= thresholdPercent;
}

export class DiskPressureWatch {
  private latest: DockerDisk | null = null;
  private timer: NodeJS.Timeout | null = null;
  private readonly listeners = new Set<() => void>();

  constructor(
    /** Where Docker keeps its data: runtime/disk-usage.ts dockerRootDir on a node. */
    private readonly root: () => Promise<string>,
    /** SVC_DISK_PRESSURE_PERCENT. */
    private readonly thresholdPercent: number,
    private readonly intervalMs: number,
    private readonly log: Pick<Logger, 'warn' | 'info'>,
  ) {}

  /** The latest reading, measured now when there is none yet; null without a Docker engine. */
  async current(): Promise<DockerDisk | null> {
    return this.latest ?? (await this.check());
  }

  /** Why a new instance must not start here now (the latest reading is under pressure); null when it may. */
  refusal(): string | null {
    const full = this.fullness();
    return full && `${full}: the instance was not started`;
  }

  /** Measures now; why a pull must stop (the disk is under pressure), null when it may go on. */
  async pullRefusal(): Promise<string | null> {
    await this.check();
    return this.fullness();
  }

  private fullness(): string | null {
    const disk = this.latest;
    if (!disk?.pressure) return null;
    const bytes = Math.round((disk.usedBytes / disk.sizeBytes) * 100);
    const files = disk.filesTotal > 0 ? Math.round((disk.filesUsed / disk.filesTotal) * 100) : 0;
    return `this node's disk is nearly full (${bytes}% of its bytes and ${files}% of its files in use, past ${this.thresholdPercent}%)`;
  }

  /** Called when the pressure starts or ends; returns the way to stop listening. */
  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.check(), this.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Measures now (what the timer does); listeners hear of a change in the pressure. */
  async check(): Promise<DockerDisk | null> {
    let disk: DockerDisk;
    try {
      const mount = await this.root();
      const fs = await fileSystemUsage(mount);
      // No inode limit (0 total) never counts as pressure.
      const pressure = underPressure(fs.usedBytes, fs.sizeBytes, this.thresholdPercent) || underPressure(fs.filesUsed, fs.filesTotal, this.thresholdPercent);
      disk = { mount, ...fs, pressure };
    } catch {
      // No engine (a host without Docker runs no tasks): nothing to report.
      return null;
    }
    const changed = (this.latest?.pressure ?? false) !== disk.pressure;
    this.latest = disk;
    if (changed) {
      const percents = {
        used_percent: Math.round((disk.usedBytes / disk.sizeBytes) * 100),
        files_used_percent: disk.filesTotal > 0 ? Math.round((disk.filesUsed / disk.filesTotal) * 100) : 0,
      };
      if (disk.pressure) this.log.warn({ mount: disk.mount, ...percents, threshold_percent: this.thresholdPercent }, 'disk pressure: the disk holding Docker data is nearly full; this node takes no new tasks');
      else this.log.info({ mount: disk.mount, ...percents }, 'disk pressure is over; this node takes tasks again');
      for (const listener of this.listeners) listener();
    }
    return disk;
  }
}
