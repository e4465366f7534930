// Shares one pull among all callers that want the same image at the same time: two
// instances of one image placed on a node together must not download it twice. Knows
// nothing of Docker; the pull itself is injected.
import type { ProgressListener, PullProgress } from './runtime.js';

/** Pulls `image`, reporting progress; resolves when the image is present. */
export type PullImage = (image: string, onProgress: ProgressListener) => Promise<void>;

interface InFlightPull {
  done: Promise<void>;
  listeners: Set<ProgressListener>;
  latest: PullProgress | null;
}

export class PullCoordinator {
  private readonly inFlight = new Map<string, InFlightPull>();
  private started = 0;

  constructor(private readonly pullImage: PullImage) {}

  /** How many pulls were actually started (shared ones count once). */
  get pullsStarted(): number {
    return this.started;
  }

  /** Images being pulled right now. */
  get inFlightImages(): string[] {
    return [...this.inFlight.keys()];
  }

  /**
   * Pulls `image`, or joins the pull already in flight for the same reference. Every
   * caller gets every later progress event (a late joiner first gets the latest one) and
   * the shared result. A listener that throws stops receiving events and that caller's
   * promise rejects with its error; the pull goes on for the others.
   */
  pull(image: string, onProgress?: ProgressListener): Promise<void> {
    const entry = this.inFlight.get(image) ?? this.start(image);
    if (!onProgress) return entry.done;
    return new Promise<void>((resolve, reject) => {
      const listener: ProgressListener = (progress) => {
        try {
          onProgress(progress);
        } catch (err) {
          entry.listeners.delete(listener);
          reject(err);
        }
      };
      entry.listeners.add(listener);
      if (entry.latest) listener(entry.latest);
      entry.done.then(resolve, reject).finally(() => entry.listeners.delete(listener));
    });
  }

  private start(image: string): InFlightPull {
    this.started += 1;
    const entry: InFlightPull = { done: Promise.resolve(), listeners: new Set(), latest: null };
    const broadcast: ProgressListener = (progress) => {
      entry.latest = progress;
      for (const listener of [...entry.listeners]) listener(progress);
    };
    // Removed once settled, success or not: a later call pulls again (the image may have
    // been deleted since, or the registry may be back).
    entry.done = Promise.resolve()
      .then(() => this.pullImage(image, broadcast))
      .finally(() => this.inFlight.delete(image));
    this.inFlight.set(image, entry);
    return entry;
  }
}
