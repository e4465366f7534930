// The part of the store that keeps inference usage: one record per served request (the
// basis of inference billing) and the sandbox keys' daily token counters.

export type UsageKind = 'chat' | 'embeddings';

export interface UsageRecord {
  id: string;
  orgId: string;
  keyId: string;
  requestId: string;
  kind: UsageKind;
  model: string;
  quantization: string;
  pool: string;
  promptTokens: number;
  completionTokens: number;
  /** Price in nano-dollars (1e-9 USD), from the model's rate card; 0 for sandbox keys. */
  costNanos: number;
  /** The request's `user` field: the caller's end-user, for attribution. */
  user: string | null;
  sandbox: boolean;
  createdAt: number;
  /** From the request's arrival to its usage being known (the last token); null when not measured. */
  durationMs?: number | null;
}

export interface UsagePage {
  data: UsageRecord[];
  hasMore: boolean;
}

export interface UsageStore {
  /** Appends the records in one transaction. */
  append(records: readonly UsageRecord[]): Promise<void>;
  /** Newest first; `after` is the id of the last record of the previous page. */
  list(orgId: string, options: { limit: number; after?: string; model?: string; keyId?: string; from?: number; to?: number }): Promise<UsagePage>;
  /** The org's newest record of `requestId`. */
  byRequest(orgId: string, requestId: string): Promise<UsageRecord | undefined>;
  /**
   * Adds `tokens` to the key's count for `day` (YYYY-MM-DD, UTC) unless that would pass
   * `cap`; atomic, so concurrent requests cannot overshoot together. Returns the count
   * before the call and whether the tokens were added.
   */
  takeSandboxTokens(keyId: string, day: string, tokens: number, cap: number): Promise<{ used: number; taken: boolean }>;
  /** The key's count for `day`, 0 when it has none; changes nothing. */
  sandboxTokensUsed(keyId: string, day: string): Promise<number>;
}
