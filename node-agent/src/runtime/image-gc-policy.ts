// Which pulled images to remove when the disk that holds Docker's data fills up, as a
// pure function: kubelet's image garbage collection. Nothing is removed below the high
// mark; above it, images no container uses go, least recently used first, until the disk
// is back under the low mark. Tenants choose images, and a start that fails or is
// cancelled before `ready` costs them nothing, so without this a node's disk fills with
// images nobody runs.

export interface ImageGcThresholds {
  /** Percent of the disk in use from which images are removed (SVC_IMAGE_GC_HIGH_PERCENT). */
  highPercent: number;
  /** Percent of the disk in use removal brings it back under (SVC_IMAGE_GC_LOW_PERCENT). */
  lowPercent: number;
}

export const DEFAULT_IMAGE_GC_THRESHOLDS: ImageGcThresholds = { highPercent: 85, lowPercent: 80 };

export interface DiskSpace {
  usedBytes: number;
  totalBytes: number;
}

export interface PulledImage {
  /** The reference a task was started with. */
  ref: string;
  sizeBytes: number;
  /** When a task last started with it (ms since the epoch). */
  lastUsedMs: number;
  /** A container (running or stopped) was made from it: Docker would refuse, and a task may need it again. */
  inUse: boolean;
}

/** References to remove, in order. */
export function imagesToRemove(disk: DiskSpace, images: readonly PulledImage[], thresholds: ImageGcThresholds): string[] {
  if (disk.totalBytes <= 0 || (disk.usedBytes / disk.totalBytes) * 100 < thresholds.highPercent) return [];
  let toFree = disk.usedBytes - (thresholds.lowPercent / 100) * disk.totalBytes;
  const removed: string[] = [];
  const oldestFirst = images.filter((i) => !i.inUse).sort((a, b) => a.lastUsedMs - b.lastUsedMs || a.ref.localeCompare(b.ref));
  for (const image of oldestFirst) {
    if (toFree <= 0) break;
    removed.push(image.ref);
    toFree -= image.sizeBytes;
  }
  return removed;
}
