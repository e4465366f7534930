// The sandbox keys' daily token cap (spec 5: 10K tokens per day per key). Tokens are
// counted per UTC day; a request that would pass the cap is refused whole with 429
// `rate_limited`, code `daily_token_cap`, and `retry-after` until the next UTC midnight.
import { ApiError, type Clock } from '@svc/shared';
import type { UsageStore } from '../store/usage-store.js';

export const utcDay = (ms: number): string => new Date(ms).toISOString().slice(0, 10);

export async function takeSandboxTokens(store: UsageStore, clock: Clock, keyId: string, tokens: number, cap: number): Promise<void> {
  const now = clock.now();
  const { used, taken } = await store.takeSandboxTokens(keyId, utcDay(now), tokens, cap);
  if (!taken) throw capReached(now, used, tokens, cap);
}

/**
 * Refuses, as takeSandboxTokens would, a request whose `tokens` (an estimate no larger
 * than what it will take: its prompt) already pass the cap, before its answer is built:
 * building is the request's cost to the control plane, and a refusal after it was free to
 * repeat. Takes nothing; takeSandboxTokens stays the one atomic check.
 */
export async function checkSandboxTokens(store: UsageStore, clock: Clock, keyId: string, tokens: number, cap: number): Promise<void> {
  const now = clock.now();
  const used = await store.sandboxTokensUsed(keyId, utcDay(now));
  if (used + tokens > cap) throw capReached(now, used, tokens, cap);
}

function capReached(now: number, used: number, tokens: number, cap: number): ApiError {
  const midnight = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate() + 1);
  const seconds = Math.max(1, Math.ceil((midnight - now) / 1000));
  return new ApiError(
    'rate_limited',
    `this sandbox key used ${used} of its ${cap} tokens today and the request needs ${tokens}; the cap resets at 00:00 UTC`,
    { code: 'daily_token_cap', headers: { 'retry-after': String(seconds) } },
  );
}
