// What the SSH gateway and the Jupyter proxy refuse, logged without letting a flood flood
// the log too: one line every few seconds, with the count since the last.
import type { Logger } from '@svc/shared';

export const REFUSAL_LOG_INTERVAL_MS = 5_000;

export class RefusalLog {
  private refused = 0;
  private loggedAt = 0;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  /** A refusal of `ip`: logged as `what` with `why` if no line went out in the last interval. */
  note(ip: string, why: string, what: string): void {
    this.refused++;
    const now = this.now();
    if (now - this.loggedAt < REFUSAL_LOG_INTERVAL_MS) return;
    this.log.info({ ip, why, refused_since_last_line: this.refused }, what);
    this.refused = 0;
    this.loggedAt = now;
  }
}
