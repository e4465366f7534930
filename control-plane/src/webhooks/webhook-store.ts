// What the webhooks feature keeps, and the store interface it keeps it through (the
// SQLite implementation is store/sqlite/webhook-store.ts). Times are milliseconds.
import type { EventRecord, StoredEvent } from '../store/records.js';

export type WebhookStatus = 'enabled' | 'disabled';

export interface WebhookSubscriptionRecord {
  id: string;
  orgId: string;
  url: string;
  /** Event type names, or ["*"] for every type. */
  eventTypes: string[];
  description: string | null;
  status: WebhookStatus;
  disabledReason: string | null;
  createdAt: number;
  /**
   * The events table's last seq when the subscription was created: it receives the
   * events after it, not the history before it. Set by the store.
   */
  fromSeq: number;
}

/** A signing secret. Rotation gives the older ones an expiry; until then both sign. */
export interface WebhookSecretRecord {
  subscriptionId: string;
  secret: string;
  createdAt: number;
  expiresAt: number | null;
}

/** pending: to be tried (again); succeeded: a 2xx came back; failed: given up. */
export type DeliveryStatus = 'pending' | 'succeeded' | 'failed';

/** One event for one subscription; its attempts are recorded separately. */
export interface DeliveryRecord {
  id: string;
  subscriptionId: string;
  eventSeq: number;
  /** The event's subject: deliveries of one subject to one subscription go in order. */
  subject: string | null;
  status: DeliveryStatus;
  attemptCount: number;
  /** Failed attempts since the delivery was created or last redelivered: the place in the retry schedule. */
  failedInRun: number;
  nextAttemptAt: number | null;
  createdAt: number;
  finishedAt: number | null;
}

export type NewDelivery = Pick<DeliveryRecord, 'id' | 'subscriptionId' | 'eventSeq' | 'subject' | 'nextAttemptAt' | 'createdAt'>;

export interface AttemptRecord {
  deliveryId: string;
  /** 1-based over the delivery's whole life, manual redeliveries included. */
  attempt: number;
  startedAt: number;
  durationMs: number;
  statusCode: number | null;
  error: string | null;
  /** When the delivery is tried next after this attempt; null when it finished. */
  nextAttemptAt: number | null;
}

/** A delivery with what is needed to send it. */
export interface DueDelivery {
  delivery: DeliveryRecord;
  subscription: WebhookSubscriptionRecord;
  event: StoredEvent;
}

/**
 * Attempts listed per delivery: the latest ones. A delivery's attempts grow with every
 * redelivery, and a list answer holding all of them grew without bound (its size, and the
 * time a SQLite read holds the process); `attemptCount` says how many there were.
 */
export const LISTED_ATTEMPTS_PER_DELIVERY = 20;

/** A delivery as listed: with its event's id and type and its latest attempts (LISTED_ATTEMPTS_PER_DELIVERY, oldest first). */
export interface DeliveryHistory {
  delivery: DeliveryRecord;
  eventId: string;
  eventType: string;
  attempts: AttemptRecord[];
}

/** How an attempt leaves its delivery (see decideAfterAttempt). */
export interface AttemptResult {
  status: DeliveryStatus;
  failedInRun: number;
  nextAttemptAt: number | null;
  /** Set when the endpoint asked to be disabled (410). */
  disableReason?: string;
}

export interface WebhookStore {
  /**
   * Stores the subscription and its first secret; returns it with `fromSeq` set. When
   * given, `mayAdd` is called with how many subscriptions the org holds, counted in the
   * same transaction under a lock every create takes (so parallel creates are counted one
   * after another); if it throws, nothing is written and the error is re-thrown.
   */
  createSubscription(
    subscription: Omit<WebhookSubscriptionRecord, 'fromSeq'>,
    secret: WebhookSecretRecord,
    mayAdd?: (held: number) => void,
  ): Promise<WebhookSubscriptionRecord>;
  getSubscription(id: string): Promise<WebhookSubscriptionRecord | undefined>;
  /** Every subscription, or one org's, oldest first. */
  listSubscriptions(orgId?: string): Promise<WebhookSubscriptionRecord[]>;
  /** Removes the subscription with its secrets, deliveries and attempts; false when unknown. */
  deleteSubscription(id: string): Promise<boolean>;
  /**
   * Adds `secret` (current from its createdAt); the secret current until then signs on
   * until `oldExpiresAt`, and one an earlier rotation left signing stops at once, so at
   * most two secrets sign each delivery whatever the number of rotations.
   */
  rotateSecret(id: string, secret: WebhookSecretRecord, oldExpiresAt: number): Promise<boolean>;
  /** Secrets that sign at `now`, newest first. */
  activeSecrets(id: string, now: number): Promise<WebhookSecretRecord[]>;

  /**
   * The outbox step, atomically: reads up to `limit` events after the fan-out cursor,
   * stores the deliveries `plan` makes of them (for subscriptions that still exist and
   * are enabled) and moves the cursor past them. Returns how many events it consumed.
   */
  fanOut(
    limit: number,
    plan: (events: StoredEvent[], subscriptions: WebhookSubscriptionRecord[]) => NewDelivery[],
  ): Promise<number>;
  /**
   * Pending deliveries of enabled subscriptions due at `now` that head their
   * (subscription, subject) chain: no earlier event of the subject is still pending.
   * Oldest first; none of the organizations in `excludeOrgs`.
   */
  dueDeliveries(now: number, limit: number, excludeOrgs?: readonly string[]): Promise<DueDelivery[]>;
  /** The delivery backlog: pending deliveries of enabled subscriptions, and when the oldest was created (metrics). */
  deliveryBacklog(): Promise<{ pending: number; oldestCreatedAt: number | null }>;
  /** Records an attempt and its delivery's new state (and a 410's disable) atomically. */
  recordAttempt(attempt: AttemptRecord, result: AttemptResult): Promise<void>;
  getDelivery(id: string): Promise<DeliveryRecord | undefined>;
  /**
   * A subscription's deliveries, newest event first, after the delivery `after` when
   * given; each with its last LISTED_ATTEMPTS_PER_DELIVERY attempts, oldest first.
   */
  listDeliveries(subscriptionId: string, options: { limit: number; after?: string }): Promise<DeliveryHistory[]>;
  /** How many of the delivery's attempts started at or after `since`, and when the oldest of them did. */
  attemptsSince(deliveryId: string, since: number): Promise<{ count: number; oldestAt: number | null }>;
  /** Makes the delivery pending again, due at `at`, at the start of the retry schedule. */
  redeliver(id: string, at: number): Promise<DeliveryRecord | undefined>;

  /**
   * Appends a deprecation announcement event unless (modelId, shutdownAt) was already
   * announced; atomically, so a restart never announces twice. True when appended.
   */
  announceDeprecation(modelId: string, shutdownAt: string, event: EventRecord): Promise<boolean>;
  /** The (modelId, shutdownAt) pairs already announced, as `${modelId} ${shutdownAt}`. */
  announcedDeprecations(): Promise<Set<string>>;
}
