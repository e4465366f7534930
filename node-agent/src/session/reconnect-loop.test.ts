import { describe, expect, it } from 'vitest';
import { createLogger, ManualClock } from '@svc/shared';
import { Backoff, RECONNECT_BACKOFF } from './backoff.js';
import { HEALTHY_SESSION_MS, runReconnectLoop, type Attempt } from './reconnect-loop.js';
import { SessionEndedError, SessionRefusedError } from './session-errors.js';

const log = createLogger('silent', 'test');

describe('runReconnectLoop', () => {
  it('retries failures with growing delays and resets after a healthy session', async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const delays: number[] = [];
    let attempts = 0;
    const attempt: Attempt = async (_signal, hooks) => {
      attempts++;
      if (attempts === 4) {
        hooks.onWelcome();
        clock.advance(HEALTHY_SESSION_MS);
      }
      if (attempts === 6) controller.abort();
      throw new SessionEndedError('UNAVAILABLE');
    };
    await runReconnectLoop(attempt, {
      signal: controller.signal,
      log,
      clock,
      backoff: new Backoff({ ...RECONNECT_BACKOFF, initialMs: 1 }, () => 1),
      onRetry: (ms) => delays.push(ms),
    });
    // attempts 1-3 fail: 1, 2, 4; attempt 4 was a healthy session: back to 1; then 2.
    expect(delays).toEqual([1, 2, 4, 1, 2]);
    expect(attempts).toBe(6);
  });

  it('does not reset after a session that was welcomed but short', async () => {
    const clock = new ManualClock();
    const controller = new AbortController();
    const delays: number[] = [];
    let attempts = 0;
    await runReconnectLoop(
      async (_signal, hooks) => {
        attempts++;
        hooks.onWelcome();
        if (attempts === 3) controller.abort();
        throw new SessionEndedError('ended');
      },
      { signal: controller.signal, log, clock, backoff: new Backoff({ ...RECONNECT_BACKOFF, initialMs: 1 }, () => 1), onRetry: (ms) => delays.push(ms) },
    );
    expect(delays).toEqual([1, 2]);
  });

  it('stops on a refusal with the refusal', async () => {
    const refusal = new SessionRefusedError('enrollment refused: unknown token (UNAUTHENTICATED)');
    await expect(
      runReconnectLoop(() => Promise.reject(refusal), { signal: new AbortController().signal, log, clock: new ManualClock() }),
    ).rejects.toBe(refusal);
  });

  it('ends quietly when aborted during the wait', async () => {
    const controller = new AbortController();
    const loop = runReconnectLoop(() => Promise.reject(new Error('down')), {
      signal: controller.signal,
      log,
      clock: new ManualClock(),
      backoff: new Backoff({ initialMs: 60_000, maxMs: 60_000, multiplier: 1 }),
    });
    setTimeout(() => controller.abort(), 10);
    await expect(loop).resolves.toBeUndefined();
  });
});
