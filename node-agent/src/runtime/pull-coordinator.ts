// Shares one pull among all callers that want the same image at the same time: two
// instances of one image placed on a node together must not download it twice. Knows
// nothing of Docker; the pull itself is injected.
import type { ProgressListener, PullProgress } from './runtime.js';

/** Pulls `image`, reporting progress; resolves when the image is present (with what the pull says of it, if anything). */
export type PullImage<T = void> = (image: string, onProgress: ProgressListener) => Promise<T>;

interface InFlightPull<T> {
  done: Promise<T>;
  listeners: Set<ProgressListener>;
  latest: PullProgress | null;
}

export class PullCoordinator<T = void> {
  private readonly inFlight = new Map<string, InFlightPull<T>>();
  private started = 0;

  constructor(private readonly pullImage: PullImage<T>) {}

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
  pull(image: string, onProgress?: ProgressListener): Promise<T> {
    const entry = this.inFlight.get(image) ?? this.start(image);
    if (!onProgress) return entry.done;
    return new Promise<T>((resolve, reject) => {
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

  private start(image: string): InFlightPull<T> {
    this.started += 1;
    const entry: InFlightPull<T> = { done: undefined as unknown as Promise<T>, listeners: new Set(), latest: null };
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
