// The agent's one reconnect loop. Everything inside an attempt (enroll, Connect, report,
// handle commands) fails fast; this is the only place that waits and tries again:
// exponential backoff with full jitter from 100 ms up to a low cap (backoff.ts), reset
// after a healthy session (one the control plane welcomed and that lasted
// HEALTHY_SESSION_MS). Each attempt may dial another control-plane address (the attempt
// function owns that choice: transport/dialer.ts).
// A refusal (SessionRefusedError) or a broken identity file ends the loop: retrying
// would only repeat it.
import type { Clock, Logger } from '@svc/shared';
import { IdentityFileError } from '../identity/identity-store.js';
import { Backoff } from './backoff.js';
import { SessionRefusedError } from './session-errors.js';

export const HEALTHY_SESSION_MS = 5_000;

export interface AttemptHooks {
  /** The control plane accepted this attempt's session. */
  onWelcome: () => void;
}

export type Attempt = (signal: AbortSignal, hooks: AttemptHooks) => Promise<void>;

export interface ReconnectLoopOptions {
  signal: AbortSignal;
  log: Logger;
  clock: Clock;
  backoff?: Backoff;
  /** Called before each wait, for tests and logs. */
  onRetry?: (delayMs: number, error: unknown) => void;
}

/** Runs attempts until `signal` aborts (resolves) or one is refused (rejects). */
export async function runReconnectLoop(attempt: Attempt, options: ReconnectLoopOptions): Promise<void> {
  const { signal, log, clock } = options;
  const backoff = options.backoff ?? new Backoff();
  while (!signal.aborted) {
    let welcomedAt: number | undefined;
    let failure: unknown;
    try {
      await attempt(signal, { onWelcome: () => (welcomedAt = clock.now()) });
    } catch (err) {
      if (signal.aborted) return;
      if (err instanceof SessionRefusedError || err instanceof IdentityFileError) throw err;
      failure = err;
    }
    if (signal.aborted) return;
    if (welcomedAt !== undefined && clock.now() - welcomedAt >= HEALTHY_SESSION_MS) backoff.reset();
    const delayMs = backoff.next();
    log.warn({ err: failure instanceof Error ? failure.message : failure, retry_in_ms: delayMs }, 'control plane session ended; reconnecting');
    options.onRetry?.(delayMs, failure);
    await sleep(delayMs, signal);
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
