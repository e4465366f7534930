// The records the store keeps, as the rest of the control plane sees them. Times are
// milliseconds since the epoch; the API layer formats them.

export type KeyKind = 'live' | 'test' | 'public';

export interface OrgRecord {
  id: string;
  name: string;
  tier: 2 | 3;
  /** CIDR ranges; empty means any source address. */
  ipAllowlist: string[];
  /** Origin patterns public keys may be used from; empty means public keys are refused. */
  referrerAllowlist: string[];
  /** Model ids the org may call; null means every model in the catalog. */
  allowedModels: string[] | null;
  /** The pool used when a request pins none (X-Service-Pool, an instance's pool); null: any. */
  defaultPool?: 'na' | 'eu' | 'apac' | null;
  /** GPUs its instances may hold at once; absent or null: the provider's default (SVC_ORG_MAX_GPUS). */
  gpuQuota?: number | null;
  createdAt: number;
}

export interface ApiKeyRecord {
  id: string;
  orgId: string;
  name: string | null;
  kind: KeyKind;
  admin: boolean;
  scopes: string[];
  prefix: string;
  /** Last 4 characters of the current secret. */
  last4: string;
  createdAt: number;
  revokedAt: number | null;
  /** The org user the key belongs to (revoked with the user); null: the org's own key. */
  userId?: string | null;
}

/** One value of a key. Rotation adds a value and gives the old ones an expiry. */
export interface KeySecretRecord {
  hash: Buffer;
  keyId: string;
  last4: string;
  createdAt: number;
  expiresAt: number | null;
}

export interface EventRecord {
  id: string;
  type: string;
  orgId: string | null;
  /** The id of what the event is about (key, instance, model), for per-subject ordering. */
  subject: string | null;
  data: unknown;
  createdAt: number;
}

export interface StoredEvent extends EventRecord {
  seq: number;
}

export interface StoredResponse {
  statusCode: number;
  headers: Record<string, string>;
  body: string;
}

/** Who holds an idempotency claim, and until when it counts as alive unless renewed. */
export interface IdempotencyOwner {
  /** One random id per control-plane process: it renews the leases of all its claims. */
  owner: string;
  /** One random id per claim: it fences writes of a claim another process took over. */
  claim: string;
  leaseUntil: number;
}

/**
 * The answer to store for a claim, written in the same transaction as the work it
 * answers (an instance and its charge), so a crash leaves both or neither.
 * `claim` fences the write: a claim taken over by another request fails the transaction.
 */
export interface IdempotencyCompletion {
  keyId: string;
  idemKey: string;
  claim: string;
  response: StoredResponse;
  /** Until when the answer is replayed: a whole window from when it is stored. */
  expiresAt: number;
}

export type IdempotencyBegin =
  | { state: 'started'; takenOver: boolean }
  | { state: 'mismatch' }
  | { state: 'in_progress' }
  | { state: 'completed'; response: StoredResponse };

/** What a look-up finds under a key without claiming it: `absent` where `begin` would start (or take over). */
export type IdempotencyFound = { state: 'absent' } | Exclude<IdempotencyBegin, { state: 'started' }>;
