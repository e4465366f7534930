import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { DEFAULT_OUTPUT_ESTIMATE, estimateTokens, TokenLimiter } from './token-limit.js';
import { RateLimiter } from './rate-limit.js';

describe('estimateTokens', () => {
  it.each([
    ['chat with max_tokens', 'chat', 400, { max_tokens: 50 }, 150],
    ['chat with max_completion_tokens (wins over max_tokens)', 'chat', 400, { max_tokens: 50, max_completion_tokens: 20 }, 120],
    ['chat without a bound', 'chat', 401, {}, 101 + DEFAULT_OUTPUT_ESTIMATE],
    ['responses with max_output_tokens', 'responses', 40, { max_output_tokens: 7 }, 17],
    ['embeddings: the input only', 'embeddings', 4_000, { max_tokens: 99 }, 1_000],
    ['a bound that is not a whole number is ignored', 'chat', 0, { max_tokens: 'lots' }, DEFAULT_OUTPUT_ESTIMATE],
  ] as const)('%s', (_name, route, bytes, body, expected) => {
    expect(estimateTokens(route, bytes, body as never)).toBe(expected);
  });
});

describe('TokenLimiter', () => {
  const limits = { 2: 600, 3: 6_000 };

  it('admits against the estimate and gives back what real usage did not use', () => {
    const limiter = new TokenLimiter(limits, new ManualClock(0));
    expect(limiter.admit('k', 'r1', 2, 500).allowed).toBe(true);
    expect(limiter.admit('k', 'r2', 2, 200).allowed).toBe(false);
    limiter.settle('k', 'r1', 100);
    expect(limiter.admit('k', 'r2', 2, 200)).toMatchObject({ allowed: true, remaining: 300 });
  });

  it('takes usage above the estimate, so the next request waits for it', () => {
    const limiter = new TokenLimiter(limits, new ManualClock(0));
    limiter.admit('k', 'r1', 2, 100);
    limiter.settle('k', 'r1', 700);
    expect(limiter.admit('k', 'r2', 2, 1).allowed).toBe(false);
  });

  it('returns a whole estimate when the request ends without usage, once', () => {
    const limiter = new TokenLimiter(limits, new ManualClock(0));
    limiter.admit('k', 'r1', 2, 600);
    limiter.release('k', 'r1');
    limiter.release('k', 'r1');
    expect(limiter.admit('k', 'r2', 2, 600)).toMatchObject({ allowed: true, remaining: 0 });
  });

  it('takes in full usage recorded after the request was released (a cut stream)', () => {
    const limiter = new TokenLimiter(limits, new ManualClock(0));
    limiter.admit('k', 'r1', 2, 100);
    limiter.release('k', 'r1');
    limiter.settle('k', 'r1', 550);
    expect(limiter.admit('k', 'r2', 2, 100).allowed).toBe(false);
    expect(limiter.admit('k', 'r3', 2, 50).allowed).toBe(true);
  });

  it('takes the request slot first and the estimate only when the slot is admitted', () => {
    const clock = new ManualClock(0);
    const requests = new RateLimiter({ 2: 2, 3: 20 }, clock);
    const limiter = new TokenLimiter(limits, clock);
    expect(limiter.takeWithRequest(requests, 'k', 'r1', 2, 500)).toMatchObject({ request: { allowed: true, remaining: 1 }, tokens: { allowed: true, remaining: 100 } });
    // The estimate does not fit: the request slot is spent all the same.
    expect(limiter.takeWithRequest(requests, 'k', 'r2', 2, 200)).toMatchObject({ request: { allowed: true, remaining: 0 }, tokens: { allowed: false } });
    // No slot left: nothing is taken from the tokens, though 100 would fit.
    expect(limiter.takeWithRequest(requests, 'k', 'r3', 2, 100)).toMatchObject({ request: { allowed: false }, tokens: null });
    expect(limiter.admit('k', 'r4', 2, 100)).toMatchObject({ allowed: true, remaining: 0 });
    // Only the admitted estimate is held, and given back.
    limiter.release('k', 'r1');
    expect(limiter.admit('k', 'r5', 2, 500).allowed).toBe(true);
  });

  it('keeps keys apart and uses the tier of the org', () => {
    const limiter = new TokenLimiter(limits, new ManualClock(0));
    expect(limiter.admit('a', 'r', 2, 600).allowed).toBe(true);
    expect(limiter.admit('b', 'r', 2, 600).allowed).toBe(true);
    expect(limiter.admit('c', 'r', 3, 6_000)).toMatchObject({ allowed: true, limit: 6_000 });
  });
});
