// The one async store interface. Routes and services see only this; SQLite is the
// embedded default and a PostgreSQL implementation can be added without touching them.
// Methods are units of work: each is atomic, so an event is written in the same
// transaction as the change that causes it.
import type {
  ApiKeyRecord,
  EventRecord,
  IdempotencyBegin,
  IdempotencyFound,
  IdempotencyOwner,
  KeySecretRecord,
  OrgRecord,
  StoredEvent,
  StoredResponse,
} from './records.js';
import type { NodeStore } from './node-store.js';
import type { WebhookStore } from '../webhooks/webhook-store.js';
import type { InstanceStore } from './instance-store.js';
import type { UsageStore } from './usage-store.js';
import type { ReplicaStore } from './replica-store.js';
import type { LedgerStore } from './ledger-store.js';
import type { ResponseStore } from './response-store.js';
import type { RemediationStore } from './remediation-store.js';
import type { OperatorStore } from './operator-store.js';
import type { UserRecord, UserStore } from './user-store.js';
import type { RateLimitStore } from './rate-limit-store.js';
import type { Leadership } from '../leadership.js';
import type { StoreChange } from './postgres/event-rows.js';

export type { StoreChange };

export interface OrgStore {
  create(org: OrgRecord): Promise<void>;
  get(id: string): Promise<OrgRecord | undefined>;
  getByName(name: string): Promise<OrgRecord | undefined>;
  list(): Promise<OrgRecord[]>;
  update(
    id: string,
    patch: Partial<Pick<OrgRecord, 'name' | 'tier' | 'ipAllowlist' | 'referrerAllowlist' | 'allowedModels' | 'defaultPool' | 'gpuQuota'>>,
  ): Promise<OrgRecord | undefined>;
}

/** An org's active (unrevoked) keys: all of them, and the sandbox (test) ones. */
export interface ActiveKeyCounts {
  all: number;
  test: number;
}

export interface KeyStore {
  /**
   * Adds the key with its first value. For a key with a `userId`, `mayOwn` is called with
   * that user as it stands under a lock that role changes and the user's removal wait for
   * (undefined when there is no such user); if it throws, nothing is written and the error
   * is re-thrown. So the owner's role a key was checked against is the role it commits under.
   * Likewise `mayAdd`, with the org's active (unrevoked) keys counted under a per-org lock
   * every create takes, so parallel creates are counted one after another.
   */
  create(
    key: ApiKeyRecord,
    secret: KeySecretRecord,
    mayOwn?: (owner: UserRecord | undefined) => void,
    mayAdd?: (active: ActiveKeyCounts) => void,
  ): Promise<void>;
  get(id: string): Promise<ApiKeyRecord | undefined>;
  list(orgId?: string): Promise<ApiKeyRecord[]>;
  findBySecretHash(hash: Buffer): Promise<{ key: ApiKeyRecord; secret: KeySecretRecord } | undefined>;
  /**
   * Adds `secret` as the key's current value; every older value that has no earlier
   * expiry stops validating at `oldExpiresAt`.
   */
  rotate(keyId: string, secret: KeySecretRecord, oldExpiresAt: number): Promise<ApiKeyRecord | undefined>;
  /** Marks the key revoked and appends `event`, atomically; repeats change nothing. */
  revoke(
    keyId: string,
    at: number,
    event: EventRecord,
  ): Promise<{ key: ApiKeyRecord; alreadyRevoked: boolean } | undefined>;
}

export interface EventStore {
  append(event: EventRecord): Promise<StoredEvent>;
  list(options?: { afterSeq?: number; type?: string; limit?: number }): Promise<StoredEvent[]>;
  /**
   * Calls `listener` soon after an event is committed through this store (the webhook
   * worker's nudge; other processes' events are found by polling). Returns an unsubscribe.
   */
  onAppend(listener: () => void): () => void;
}

export interface IdempotencyStore {
  /**
   * Claims (keyId, idemKey) for a request whose canonical hash is `requestHash`, or
   * reports what holds it. An answer past its expiry counts as absent, and so does an
   * unfinished claim past its expiry whose lease ran out; one whose process still renews
   * its lease is in progress however long it runs. An unfinished claim whose lease ran
   * out (its process died) is taken over by the same request.
   */
  begin(keyId: string, idemKey: string, requestHash: string, now: number, expiresAt: number, holder: IdempotencyOwner): Promise<IdempotencyBegin>;
  /**
   * What `begin` would find, without claiming or deleting anything: the stored answer, a
   * claim in progress, another request under the key, or `absent` (nothing, an expired
   * row, or a claim whose lease ran out). Lets a retry be answered before the checks that
   * only a request that runs needs (its balance).
   */
  find(keyId: string, idemKey: string, requestHash: string, now: number): Promise<IdempotencyFound>;
  /**
   * Stores the answer of `claim`, replayed until `expiresAt`. An answer already stored
   * with the work it answers (2xx) is not replaced by a later error of the same request.
   */
  complete(keyId: string, idemKey: string, claim: string, response: StoredResponse, expiresAt: number): Promise<void>;
  /** Gives `claim` up if it has no stored answer (the request could not be recorded, or asks to be retried). */
  release(keyId: string, idemKey: string, claim: string): Promise<void>;
  /** Extends the lease of every unfinished claim of `owner` (its process is alive). */
  renew(owner: string, leaseUntil: number): Promise<void>;
  /** Deletes what `begin` counts as absent: expired answers, and expired claims whose lease ran out. */
  purgeExpired(now: number): Promise<number>;
}

export interface Store {
  readonly orgs: OrgStore;
  readonly keys: KeyStore;
  readonly events: EventStore;
  readonly idempotency: IdempotencyStore;
  readonly nodes: NodeStore;
  readonly webhooks: WebhookStore;
  readonly instances: InstanceStore;
  readonly usage: UsageStore;
  readonly replicas: ReplicaStore;
  readonly ledger: LedgerStore;
  readonly responses: ResponseStore;
  /**
   * GPU remediation state. Optional so a store engine without it still runs: the
   * control plane then only marks faulty GPUs (the agent's verdict) and acts on nothing.
   */
  readonly remediations?: RemediationStore;
  /** Operator keys and the audit trail of their writes. */
  readonly operators: OperatorStore;
  /** The users of each org and the keys they own. */
  readonly users: UserStore;
  /**
   * Per-key limit state shared by several processes (PostgreSQL). Absent on a store only
   * one process opens (SQLite): the limiters then keep their buckets in memory.
   */
  readonly rateLimits?: RateLimitStore;
  /**
   * Hears keys, key values, orgs and replicas change, whichever process changed them
   * (PostgreSQL NOTIFY). Resolves once listening. Absent when only this process writes.
   */
  onChange?(listener: (change: StoreChange) => void): Promise<() => void>;
  /**
   * Joins the election of the process that runs the singletons (see leadership.ts),
   * having made a first try. Absent when this process is the only one: it always leads.
   */
  campaign?(options: { retryMs: number; onError?: (err: unknown) => void }): Promise<Leadership>;
  /** Latest applied migration version; proves the database answers. */
  schemaVersion(): Promise<number>;
  close(): Promise<void>;
}
