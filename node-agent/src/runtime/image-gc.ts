// Image garbage collection on the node (image-gc-policy.ts decides, this does the I/O).
// Only images the agent pulled for tasks are ever removed, never the provider's others:
// each task start records its image and when (and an instance's pull the ID of the image
// its name left, while nothing names it), in `$SVC_AGENT_DATA_DIR/image-use.json`
// (written whole, a temporary file renamed over the old one), so a restarted agent still
// knows which images are its own and how recently they ran.
import type Docker from 'dockerode';
import type { Logger } from '@svc/shared';
import { readDataFile, writeDataFile } from '../config/data-file.js';
import { dockerStatus, isNotFound } from './docker-errors.js';
import { dockerRootDir, fileSystemUsage } from './disk-usage.js';
import { withDefaultTag } from './image-reference.js';
import { imagesToRemove, type DiskSpace, type ImageGcThresholds, type PulledImage } from './image-gc-policy.js';

/** How Docker's listing names an image without a name. */
const NO_NAME = '<none>:<none>';
const NO_DIGEST = '<none>@<none>';
const IMAGE_ID = /^sha256:[0-9a-f]{64}$/;

export interface ImageGcSettings extends ImageGcThresholds {
  /** Pause between two looks at the disk (SVC_IMAGE_GC_INTERVAL_MS). */
  intervalMs: number;
}

/** When each image reference last started a task; `file` undefined: in memory only. */
export class ImageUseLog {
  private readonly lastUsed = new Map<string, number>();

  constructor(private readonly file?: string) {
    if (!file) return;
    // Nothing saved yet, or unreadable: images pulled before are left alone (never removed by mistake).
    for (const [ref, at] of Object.entries(readDataFile(file))) if (typeof at === 'number' && Number.isFinite(at)) this.lastUsed.set(ref, at);
  }

  get entries(): ReadonlyMap<string, number> {
    return this.lastUsed;
  }

  used(ref: string, at: number): void {
    this.lastUsed.set(ref, at);
    this.save();
  }

  /** `ifUsedAt`: only if not used again since then (a start may record it while a collection runs). */
  forget(ref: string, ifUsedAt?: number): void {
    if (ifUsedAt !== undefined && this.lastUsed.get(ref) !== ifUsedAt) return;
    if (this.lastUsed.delete(ref)) this.save();
  }

  private save(): void {
    if (this.file) writeDataFile(this.file, this.lastUsed);
  }
}

export class ImageGc {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<string[]> | null = null;

  constructor(
    private readonly docker: Docker,
    private readonly useLog: ImageUseLog,
    private readonly settings: ImageGcSettings,
    private readonly log: Pick<Logger, 'info' | 'warn'>,
    private readonly now: () => number = Date.now,
  ) {}

  /** A task is starting with `ref`: it is the agent's to collect later, and fresh now. */
  recordUse(ref: string): void {
    this.useLog.used(ref, this.now());
  }

  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.collect().catch((err: unknown) => this.log.warn({ err }, 'image garbage collection failed'));
    }, this.settings.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** One look at the disk; removes what the policy says. Returns the references removed. */
  collect(): Promise<string[]> {
    this.running ??= this.collectOnce().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async collectOnce(): Promise<string[]> {
    const disk = await this.diskSpace();
    const candidates = await this.pulledImages();
    const refs = imagesToRemove(disk, candidates, this.settings);
    const removed: string[] = [];
    for (const ref of refs) {
      try {
        await this.docker.getImage(ref).remove();
        removed.push(ref);
        this.useLog.forget(ref);
      } catch (err) {
        // Gone already: forget it. In use since the listing (a container made from it meanwhile): keep it.
        if (isNotFound(err)) this.useLog.forget(ref);
        else if (dockerStatus(err) !== 409) throw err;
      }
    }
    if (removed.length > 0) {
      const usedPercent = Math.round((disk.usedBytes / disk.totalBytes) * 100);
      this.log.info({ removed, used_percent: usedPercent, high_percent: this.settings.highPercent }, 'removed unused images: the disk holding Docker data was filling up');
    }
    return removed;
  }

  private async diskSpace(): Promise<DiskSpace> {
    const fs = await fileSystemUsage(await dockerRootDir(this.docker));
    return { usedBytes: fs.usedBytes, totalBytes: fs.sizeBytes };
  }

  /** The images the use log names that exist now, with their size and whether a container uses them. */
  private async pulledImages(): Promise<PulledImage[]> {
    // Taken before the listing: an image pulled meanwhile is recorded after it, and left for the next look.
    const uses = [...this.useLog.entries];
    const [images, containers] = await Promise.all([this.docker.listImages(), this.docker.listContainers({ all: true })]);
    const inUse = new Set(containers.map((c) => c.ImageID));
    const byRef = new Map<string, Docker.ImageInfo>();
    const unnamed = new Map<string, Docker.ImageInfo>();
    for (const image of images) {
      const tags = (image.RepoTags ?? []).filter((tag) => tag !== NO_NAME);
      for (const ref of [...tags, ...(image.RepoDigests ?? [])]) byRef.set(ref, image);
      // No tag and no digest name: an untagged image the operator pulled by digest is not the agent's.
      if (tags.length === 0 && (image.RepoDigests ?? []).every((digest) => digest === NO_DIGEST)) unnamed.set(image.Id, image);
    }
    const pulled: PulledImage[] = [];
    for (const [ref, lastUsedMs] of uses) {
      // As Docker lists it among an image's RepoTags: `busybox` is `busybox:latest`. An ID
      // (an instance's image whose name moved on) only while nothing names it again.
      const image = IMAGE_ID.test(ref) ? unnamed.get(ref) : byRef.get(withDefaultTag(ref));
      // Removed by someone else: nothing left to collect. (A use is recorded only once the image is present.)
      if (!image) {
        this.useLog.forget(ref, lastUsedMs);
        continue;
      }
      pulled.push({ ref, sizeBytes: image.Size, lastUsedMs, inUse: inUse.has(image.Id) });
    }
    return pulled;
  }
}
