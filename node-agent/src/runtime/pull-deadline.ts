// When a pull has gone on too long. A tenant names the image, so it also names the
// registry: one that answers and then sends nothing (or a trickle) would keep the
// instance `starting`, its GPUs held and unbilled, for as long as the pull lasts. Two
// bounds, checked every second by the runtime:
// - stalled: less than STALL_BYTES moved (downloaded or unpacked) over the last
//   `stallMs`, which a dead or trickling registry hits and a slow but working one does not;
// - too long: the whole pull past `timeoutMs`, which bounds a registry that trickles just
//   fast enough (1 MiB a window) and an image that is simply too big for the link.
// Pure: the runtime passes in the bytes moved and the time.

/** Less than this moved within the stall window is no progress. */
export const STALL_BYTES = 1024 * 1024;

export interface PullDeadlineSettings {
  stallMs: number;
  timeoutMs: number;
}

export class PullDeadline {
  private readonly started: number;
  private windowStart: number;
  private windowBytes = 0;

  constructor(
    private readonly settings: PullDeadlineSettings,
    now: number,
  ) {
    this.started = now;
    this.windowStart = now;
  }

  /** The pull has moved `bytes` in all so far (never less than before: a retried layer does not count twice). */
  moved(bytes: number, now: number): void {
    if (bytes - this.windowBytes >= STALL_BYTES) {
      this.windowStart = now;
      this.windowBytes = bytes;
    }
  }

  /** Why the pull must stop now, or null. */
  overdue(now: number): string | null {
    if (now - this.started >= this.settings.timeoutMs) return `it took longer than ${formatDuration(this.settings.timeoutMs)}`;
    if (now - this.windowStart >= this.settings.stallMs) return `it moved less than 1 MiB in ${formatDuration(this.settings.stallMs)} (the registry stopped sending)`;
    return null;
  }
}

/** `ms` as the pull's messages say it: `3 s`, `60 min`. */
export const formatDuration = (ms: number): string => (ms % 60_000 === 0 ? `${ms / 60_000} min` : `${ms / 1000} s`);
