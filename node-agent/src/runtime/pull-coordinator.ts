// Shares one pull among all callers that want the same image at the same time: two
// instances of one image placed on a node together must not download it twice. Knows
// nothing of Docker; the pull itself is injected.
import type { ProgressListener, PullProgress } from './runtime.js';

/**
 * Pulls `image`, reporting progress; resolves when the image is present (with what the pull
 * says of it, if anything). `signal` aborts once nobody wants the image any more: the pull
 * stops as soon as it can (its promise may still settle later, however it likes).
 */
export type PullImage<T = void> = (image: string, onProgress: ProgressListener, signal: AbortSignal) => Promise<T>;

interface InFlightPull<T> {
  done: Promise<T>;
  listeners: Set<ProgressListener>;
  latest: PullProgress | null;
  /** Callers still waiting for this pull. */
  waiting: number;
  /** Aborted when the last caller gave up its interest. */
  abandon: AbortController;
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
   * promise rejects with its error; the pull goes on for the others. A caller whose
   * `signal` aborts leaves the pull (its promise rejects with the signal's reason): the
   * pull goes on while anyone else waits for it, and is stopped when nobody does.
   */
  pull(image: string, onProgress?: ProgressListener, signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(signal.reason);
    const entry = this.inFlight.get(image) ?? this.start(image);
    entry.waiting += 1;
    return new Promise<T>((resolve, reject) => {
      let left = false;
      const leave = (why: unknown) => {
        if (left) return;
        left = true;
        entry.listeners.delete(listener);
        signal?.removeEventListener('abort', onAbort);
        entry.waiting -= 1;
        reject(why);
        if (entry.waiting === 0) this.abandon(image, entry);
      };
      const onAbort = () => leave(signal!.reason);
      const listener: ProgressListener = (progress) => {
        try {
          onProgress?.(progress);
        } catch (err) {
          leave(err);
        }
      };
      entry.listeners.add(listener);
      signal?.addEventListener('abort', onAbort, { once: true });
      if (entry.latest) listener(entry.latest);
      entry.done.then(
        (value) => {
          if (left) return;
          left = true;
          entry.listeners.delete(listener);
          signal?.removeEventListener('abort', onAbort);
          resolve(value);
        },
        (err: unknown) => leave(err),
      );
    });
  }

  /** Nobody waits for the pull any more: it is stopped, and a later call pulls anew. */
  private abandon(image: string, entry: InFlightPull<T>): void {
    if (this.inFlight.get(image) === entry) this.inFlight.delete(image);
    entry.abandon.abort(new Error(`nobody waits for the pull of ${image} any more`));
  }

  private start(image: string): InFlightPull<T> {
    this.started += 1;
    const entry: InFlightPull<T> = { done: undefined as unknown as Promise<T>, listeners: new Set(), latest: null, waiting: 0, abandon: new AbortController() };
    const broadcast: ProgressListener = (progress) => {
      entry.latest = progress;
      for (const listener of [...entry.listeners]) listener(progress);
    };
    // Removed once settled, success or not: a later call pulls again (the image may have
    // been deleted since, or the registry may be back).
    entry.done = Promise.resolve()
      .then(() => this.pullImage(image, broadcast, entry.abandon.signal))
      .finally(() => {
        if (this.inFlight.get(image) === entry) this.inFlight.delete(image);
      });
    // Callers that left have nobody to hear the end of an abandoned pull.
    entry.done.catch(() => undefined);
    this.inFlight.set(image, entry);
    return entry;
  }
}
