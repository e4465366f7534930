// The part of the store that keeps Responses API responses stored with `store: true`: the
// response as it was answered, and the conversation that produced it (what a request
// naming it in previous_response_id continues), each readable only by its organization
// and only until it expires.

export interface StoredResponseRecord {
  id: string;
  orgId: string;
  /** The Response object as answered (JSON). */
  response: Record<string, unknown>;
  /** The chat messages of the conversation, this response's output included, instructions left out. */
  history: unknown[];
  createdAt: number;
  expiresAt: number;
}

export interface ResponseStore {
  put(record: StoredResponseRecord): Promise<void>;
  /** Undefined when absent, expired or another organization's. */
  get(orgId: string, id: string, now: number): Promise<StoredResponseRecord | undefined>;
  /** The Response object alone (its conversation may be megabytes): for GET and item references. */
  getResponse(orgId: string, id: string, now: number): Promise<Record<string, unknown> | undefined>;
  /** True when a live response of the organization was deleted. */
  delete(orgId: string, id: string, now: number): Promise<boolean>;
  /** Deletes expired responses; returns how many. */
  purgeExpired(now: number): Promise<number>;
}
