// Turns Docker's pull event stream (one JSON object per layer step) into one progress
// fraction for the whole image. Pure, so the arithmetic is tested without a registry.
import type { PullProgress } from './runtime.js';

/** One line of Docker's `POST /images/create` stream. */
export interface PullEvent {
  status?: string;
  id?: string;
  progress?: string;
  progressDetail?: { current?: number; total?: number };
  error?: string;
  errorDetail?: { message?: string };
}

interface LayerProgress {
  /** Compressed size in bytes, known from the first Downloading/Extracting event. */
  total: number | null;
  download: number; // 0..1
  extract: number; // 0..1
}

// Statuses whose `id` is a layer digest (other events carry the tag or nothing).
const LAYER_STATUSES = [
  'Pulling fs layer',
  'Waiting',
  'Downloading',
  'Verifying Checksum',
  'Download complete',
  'Extracting',
  'Pull complete',
  'Already exists',
  'Retrying',
];

/** Just below 1: "1" means the image is usable, which only the end of the stream says. */
const BEFORE_DONE = 0.99;

/**
 * Fraction = bytes-weighted mean over the layers that must be fetched of
 * (download + extract) / 2. Extraction counts half because on a fast registry unpacking
 * a large layer takes about as long as fetching it. Layers whose size is not known yet
 * weigh the mean known size, so a later layer's size appearing does not make the bar jump
 * back much; the reported value never decreases anyway. Layers that already exist locally
 * are not counted.
 */
export class PullProgressTracker {
  private readonly layers = new Map<string, LayerProgress>();
  private reported = 0;
  private moved = 0;
  private status = 'Pulling';

  constructor(private readonly image: string) {}

  update(event: PullEvent): PullProgress {
    const status = event.status ?? '';
    const layerId = event.id && LAYER_STATUSES.some((s) => status.startsWith(s)) ? event.id : null;
    this.status = layerId ? `${status} ${layerId}` : status || this.status;
    if (layerId) this.applyLayerEvent(layerId, status, event.progressDetail ?? {});
    this.reported = Math.max(this.reported, Math.min(this.computeFraction(), BEFORE_DONE));
    return this.snapshot();
  }

  /** Compressed bytes of the layers to fetch, as far as the registry has told their sizes. */
  layerBytes(): number {
    let total = 0;
    for (const layer of this.layers.values()) total += layer.total ?? 0;
    return total;
  }

  /** How many layers the pull fetched (those already on the node not counted). */
  layersFetched(): number {
    return this.layers.size;
  }

  /** Bytes downloaded plus bytes unpacked so far, over the layers whose size is known; never less than before. */
  movedBytes(): number {
    let moved = 0;
    for (const layer of this.layers.values()) moved += (layer.total ?? 0) * (layer.download + layer.extract);
    this.moved = Math.max(this.moved, Math.round(moved));
    return this.moved;
  }

  /** The stream ended without an error: the image is present. */
  complete(finalStatus?: string): PullProgress {
    this.reported = 1;
    if (finalStatus) this.status = finalStatus;
    return this.snapshot();
  }

  private snapshot(): PullProgress {
    return { image: this.image, fraction: this.reported, status: this.status };
  }

  private applyLayerEvent(id: string, status: string, detail: { current?: number; total?: number }): void {
    if (status === 'Already exists') {
      this.layers.delete(id);
      return;
    }
    const layer = this.layers.get(id) ?? { total: null, download: 0, extract: 0 };
    this.layers.set(id, layer);
    const total = detail.total && detail.total > 0 ? detail.total : null;
    const ratio = total && detail.current !== undefined ? Math.min(detail.current / total, 1) : null;
    if (total) layer.total = total;
    if (status === 'Downloading') {
      if (ratio !== null) layer.download = ratio;
    } else if (status === 'Verifying Checksum' || status === 'Download complete') {
      layer.download = 1;
    } else if (status === 'Extracting') {
      layer.download = 1;
      if (ratio !== null) layer.extract = ratio;
    } else if (status === 'Pull complete') {
      layer.download = 1;
      layer.extract = 1;
    } else if (status.startsWith('Retrying')) {
      layer.download = 0;
    }
  }

  private computeFraction(): number {
    const layers = [...this.layers.values()];
    if (layers.length === 0) return 0;
    const known = layers.filter((l) => l.total !== null).map((l) => l.total as number);
    const estimate = known.length > 0 ? known.reduce((a, b) => a + b, 0) / known.length : 1;
    let done = 0;
    let weight = 0;
    for (const layer of layers) {
      const w = layer.total ?? estimate;
      weight += w;
      done += (w * (layer.download + layer.extract)) / 2;
    }
    return done / weight;
  }
}

/** Docker reports some pull failures inside the stream, after a 200 answer. */
export const pullEventError = (event: PullEvent): string | null =>
  event.error ?? event.errorDetail?.message ?? null;

/** The share of an instance pull's bar its staging takes (registry-front.ts): the download half, as the tracker weighs a layer. */
const STAGING_SHARE = 0.5;

/**
 * One bar for an instance's pull: the agent's staging of its blobs, then dockerd's pull of
 * them from the front (whose downloads are local and quick, its unpacking not). Never
 * decreases; without staging, dockerd's own fraction as it is.
 */
export class StagedPullProgress {
  private reported = 0;

  constructor(
    private readonly image: string,
    private readonly listener: (progress: PullProgress) => void,
    private readonly staged: boolean,
  ) {}

  staging(progress: { bytes: number; total: number; status: string }): void {
    this.emit(progress.total > 0 ? (STAGING_SHARE * progress.bytes) / progress.total : 0, progress.status);
  }

  /** dockerd's progress from the front. */
  readonly pulling = (progress: PullProgress): void => {
    const fraction = progress.fraction === 1 || !this.staged ? progress.fraction : STAGING_SHARE + (1 - STAGING_SHARE) * progress.fraction;
    this.emit(fraction, progress.status);
  };

  private emit(fraction: number, status: string): void {
    this.reported = fraction === 1 ? 1 : Math.max(this.reported, Math.min(fraction, BEFORE_DONE));
    this.listener({ image: this.image, fraction: this.reported, status });
  }
}
