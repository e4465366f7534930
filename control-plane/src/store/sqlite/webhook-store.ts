// SQLite implementation of the webhook store: subscriptions, secrets, the delivery
// outbox (fan-out cursor, deliveries, attempts) and announced deprecations.
import type Database from 'better-sqlite3';
import type { EventRecord, StoredEvent } from '../records.js';
import type {
  AttemptRecord,
  AttemptResult,
  DeliveryHistory,
  DeliveryRecord,
  DeliveryStatus,
  DueDelivery,
  NewDelivery,
  WebhookSecretRecord,
  WebhookStatus,
  WebhookStore,
  WebhookSubscriptionRecord,
} from '../../webhooks/webhook-store.js';
import { LISTED_ATTEMPTS_PER_DELIVERY } from '../../webhooks/webhook-store.js';
import { insertEvent, toEvent } from './event-rows.js';

type Row = Record<string, unknown>;
type Db = Database.Database;

const nullableNumber = (value: unknown): number | null => (value === null ? null : Number(value));
const nullableString = (value: unknown): string | null => (value === null ? null : String(value));

export function toSubscription(row: Row): WebhookSubscriptionRecord {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    url: String(row.url),
    eventTypes: JSON.parse(String(row.event_types)) as string[],
    description: nullableString(row.description),
    status: String(row.status) as WebhookStatus,
    disabledReason: nullableString(row.disabled_reason),
    createdAt: Number(row.created_at),
    fromSeq: Number(row.from_seq),
  };
}

export function toSecret(row: Row): WebhookSecretRecord {
  return {
    subscriptionId: String(row.subscription_id),
    secret: String(row.secret),
    createdAt: Number(row.created_at),
    expiresAt: nullableNumber(row.expires_at),
  };
}

export function toDelivery(row: Row): DeliveryRecord {
  return {
    id: String(row.id),
    subscriptionId: String(row.subscription_id),
    eventSeq: Number(row.event_seq),
    subject: nullableString(row.subject),
    status: String(row.status) as DeliveryStatus,
    attemptCount: Number(row.attempt_count),
    failedInRun: Number(row.failed_in_run),
    nextAttemptAt: nullableNumber(row.next_attempt_at),
    createdAt: Number(row.created_at),
    finishedAt: nullableNumber(row.finished_at),
  };
}

export function toAttempt(row: Row): AttemptRecord {
  return {
    deliveryId: String(row.delivery_id),
    attempt: Number(row.attempt),
    startedAt: Number(row.started_at),
    durationMs: Number(row.duration_ms),
    statusCode: nullableNumber(row.status_code),
    error: nullableString(row.error),
    nextAttemptAt: nullableNumber(row.next_attempt_at),
  };
}

/** The columns of a joined row that carry `prefix` (another table's), without it. */
export function prefixed(row: Row, prefix: string): Row {
  const out: Row = {};
  for (const [name, value] of Object.entries(row)) if (name.startsWith(prefix)) out[name.slice(prefix.length)] = value;
  return out;
}

export class SqliteWebhookStore implements WebhookStore {
  constructor(private readonly db: Db) {}

  async createSubscription(
    subscription: Omit<WebhookSubscriptionRecord, 'fromSeq'>,
    secret: WebhookSecretRecord,
    mayAdd?: (held: number) => void,
  ): Promise<WebhookSubscriptionRecord> {
    return this.db.transaction(() => {
      // .immediate(): the write lock is held from here, so creates are counted one at a time.
      if (mayAdd) {
        mayAdd((this.db.prepare('SELECT count(*) AS n FROM webhook_subscriptions WHERE org_id = ?').get(subscription.orgId) as { n: number }).n);
      }
      // Inside the write transaction: no event can slip between this read and the insert.
      const fromSeq = (this.db.prepare('SELECT COALESCE(MAX(seq), 0) AS seq FROM events').get() as { seq: number }).seq;
      this.db
        .prepare(
          `INSERT INTO webhook_subscriptions (id, org_id, url, event_types, description, status, disabled_reason, created_at, from_seq)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          subscription.id,
          subscription.orgId,
          subscription.url,
          JSON.stringify(subscription.eventTypes),
          subscription.description,
          subscription.status,
          subscription.disabledReason,
          subscription.createdAt,
          fromSeq,
        );
      this.insertSecret(secret);
      return { ...subscription, fromSeq };
    }).immediate();
  }

  private insertSecret(secret: WebhookSecretRecord): void {
    this.db
      .prepare('INSERT INTO webhook_secrets (subscription_id, secret, created_at, expires_at) VALUES (?, ?, ?, ?)')
      .run(secret.subscriptionId, secret.secret, secret.createdAt, secret.expiresAt);
  }

  async getSubscription(id: string): Promise<WebhookSubscriptionRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM webhook_subscriptions WHERE id = ?').get(id) as Row | undefined;
    return row && toSubscription(row);
  }

  async listSubscriptions(orgId?: string): Promise<WebhookSubscriptionRecord[]> {
    const rows = orgId
      ? this.db.prepare('SELECT * FROM webhook_subscriptions WHERE org_id = ? ORDER BY created_at, id').all(orgId)
      : this.db.prepare('SELECT * FROM webhook_subscriptions ORDER BY created_at, id').all();
    return (rows as Row[]).map(toSubscription);
  }

  async deleteSubscription(id: string): Promise<boolean> {
    return this.db.transaction(() => {
      // Attempts and secrets go with their parents (ON DELETE CASCADE).
      return this.db.prepare('DELETE FROM webhook_subscriptions WHERE id = ?').run(id).changes === 1;
    }).immediate();
  }

  async rotateSecret(id: string, secret: WebhookSecretRecord, oldExpiresAt: number): Promise<boolean> {
    return this.db.transaction(() => {
      if (!this.db.prepare('SELECT 1 FROM webhook_subscriptions WHERE id = ?').get(id)) return false;
      // The current secret signs on until oldExpiresAt; one an earlier rotation left signing stops now.
      this.db
        .prepare(
          `UPDATE webhook_secrets SET expires_at = CASE WHEN expires_at IS NULL THEN @old ELSE MIN(expires_at, @now) END
           WHERE subscription_id = @id AND (expires_at IS NULL OR expires_at > @now)`,
        )
        .run({ old: oldExpiresAt, id, now: secret.createdAt });
      this.insertSecret(secret);
      return true;
    }).immediate();
  }

  async activeSecrets(id: string, now: number): Promise<WebhookSecretRecord[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM webhook_secrets WHERE subscription_id = ? AND (expires_at IS NULL OR expires_at > ?)
         ORDER BY created_at DESC, id DESC`,
      )
      .all(id, now) as Row[];
    return rows.map(toSecret);
  }

  async fanOut(
    limit: number,
    plan: (events: StoredEvent[], subscriptions: WebhookSubscriptionRecord[]) => NewDelivery[],
  ): Promise<number> {
    return this.db.transaction(() => {
      const cursor = (this.db.prepare('SELECT last_seq FROM webhook_fan_out_cursor WHERE id = 1').get() as { last_seq: number })
        .last_seq;
      const events = (this.db.prepare('SELECT * FROM events WHERE seq > ? ORDER BY seq LIMIT ?').all(cursor, limit) as Row[]).map(
        toEvent,
      );
      if (events.length === 0) return 0;
      const subscriptions = (
        this.db.prepare(`SELECT * FROM webhook_subscriptions WHERE status = 'enabled'`).all() as Row[]
      ).map(toSubscription);
      const insert = this.db.prepare(
        `INSERT OR IGNORE INTO webhook_deliveries (id, subscription_id, event_seq, subject, status, next_attempt_at, created_at)
         VALUES (?, ?, ?, ?, 'pending', ?, ?)`,
      );
      for (const d of plan(events, subscriptions)) {
        insert.run(d.id, d.subscriptionId, d.eventSeq, d.subject, d.nextAttemptAt, d.createdAt);
      }
      this.db.prepare('UPDATE webhook_fan_out_cursor SET last_seq = ? WHERE id = 1').run(events.at(-1)!.seq);
      return events.length;
    }).immediate();
  }

  async deliveryBacklog(): Promise<{ pending: number; oldestCreatedAt: number | null }> {
    const row = this.db
      .prepare(
        `SELECT count(*) AS pending, min(d.created_at) AS oldest
         FROM webhook_deliveries d
         JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.status = 'enabled'
         WHERE d.status = 'pending'`,
      )
      .get() as { pending: number; oldest: number | null };
    return { pending: row.pending, oldestCreatedAt: row.oldest };
  }

  async dueDeliveries(now: number, limit: number, excludeOrgs: readonly string[] = []): Promise<DueDelivery[]> {
    const excluded = excludeOrgs.length === 0 ? '' : `AND s.org_id NOT IN (SELECT value FROM json_each(@excluded))`;
    const rows = this.db
      .prepare(
        `SELECT d.*,
                s.id AS s_id, s.org_id AS s_org_id, s.url AS s_url, s.event_types AS s_event_types,
                s.description AS s_description, s.status AS s_status, s.disabled_reason AS s_disabled_reason,
                s.created_at AS s_created_at, s.from_seq AS s_from_seq,
                e.seq AS e_seq, e.id AS e_id, e.type AS e_type, e.org_id AS e_org_id, e.subject AS e_subject,
                e.data AS e_data, e.created_at AS e_created_at
         FROM webhook_deliveries d
         JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.status = 'enabled'
         JOIN events e ON e.seq = d.event_seq
         WHERE d.status = 'pending' AND d.next_attempt_at <= @now ${excluded}
           AND (d.subject IS NULL OR NOT EXISTS (
             SELECT 1 FROM webhook_deliveries p
             WHERE p.subscription_id = d.subscription_id AND p.subject = d.subject
               AND p.status = 'pending' AND p.event_seq < d.event_seq))
         ORDER BY d.next_attempt_at, d.event_seq
         LIMIT @limit`,
      )
      .all(excludeOrgs.length === 0 ? { now, limit } : { now, limit, excluded: JSON.stringify(excludeOrgs) }) as Row[];
    return rows.map((row) => ({
      delivery: toDelivery(row),
      subscription: toSubscription(prefixed(row, 's_')),
      event: toEvent(prefixed(row, 'e_')),
    }));
  }

  async recordAttempt(attempt: AttemptRecord, result: AttemptResult): Promise<void> {
    this.db.transaction(() => {
      const delivery = this.db.prepare('SELECT subscription_id FROM webhook_deliveries WHERE id = ?').get(attempt.deliveryId) as
        | Row
        | undefined;
      // Deleted with its subscription while the attempt was in flight: nothing to record.
      if (!delivery) return;
      this.db
        .prepare(
          `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, next_attempt_at)
           VALUES (?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(attempt.deliveryId, attempt.attempt, attempt.startedAt, attempt.durationMs, attempt.statusCode, attempt.error, attempt.nextAttemptAt);
      const finishedAt = result.status === 'pending' ? null : attempt.startedAt + attempt.durationMs;
      this.db
        .prepare(
          `UPDATE webhook_deliveries
           SET status = ?, attempt_count = MAX(attempt_count, ?), failed_in_run = ?, next_attempt_at = ?, finished_at = ?
           WHERE id = ?`,
        )
        .run(result.status, attempt.attempt, result.failedInRun, result.nextAttemptAt, finishedAt, attempt.deliveryId);
      if (result.disableReason !== undefined) {
        this.db
          .prepare(`UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = ? WHERE id = ?`)
          .run(result.disableReason, delivery.subscription_id);
      }
    }).immediate();
  }

  async getDelivery(id: string): Promise<DeliveryRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as Row | undefined;
    return row && toDelivery(row);
  }

  async listDeliveries(subscriptionId: string, options: { limit: number; after?: string }): Promise<DeliveryHistory[]> {
    const rows = this.db
      .prepare(
        `SELECT d.*, e.id AS event_id, e.type AS event_type FROM webhook_deliveries d
         JOIN events e ON e.seq = d.event_seq
         WHERE d.subscription_id = @subscriptionId
           AND (@after IS NULL OR d.event_seq < (SELECT event_seq FROM webhook_deliveries WHERE id = @after))
         ORDER BY d.event_seq DESC LIMIT @limit`,
      )
      .all({ subscriptionId, after: options.after ?? null, limit: options.limit }) as Row[];
    // The latest attempts only, read backwards along the (delivery_id, attempt) index.
    const attempts = this.db.prepare('SELECT * FROM webhook_attempts WHERE delivery_id = ? ORDER BY attempt DESC, id DESC LIMIT ?');
    return rows.map((row) => ({
      delivery: toDelivery(row),
      eventId: String(row.event_id),
      eventType: String(row.event_type),
      attempts: (attempts.all(row.id, LISTED_ATTEMPTS_PER_DELIVERY) as Row[]).map(toAttempt).reverse(),
    }));
  }

  async attemptsSince(deliveryId: string, since: number): Promise<{ count: number; oldestAt: number | null }> {
    const row = this.db
      .prepare('SELECT count(*) AS n, min(started_at) AS oldest FROM webhook_attempts WHERE delivery_id = ? AND started_at >= ?')
      .get(deliveryId, since) as { n: number; oldest: number | null };
    return { count: Number(row.n), oldestAt: row.oldest === null ? null : Number(row.oldest) };
  }

  async redeliver(id: string, at: number): Promise<DeliveryRecord | undefined> {
    return this.db.transaction(() => {
      const changed = this.db
        .prepare(
          `UPDATE webhook_deliveries SET status = 'pending', failed_in_run = 0, next_attempt_at = ?, finished_at = NULL WHERE id = ?`,
        )
        .run(at, id).changes;
      if (changed === 0) return undefined;
      return toDelivery(this.db.prepare('SELECT * FROM webhook_deliveries WHERE id = ?').get(id) as Row);
    }).immediate();
  }

  async announceDeprecation(modelId: string, shutdownAt: string, event: EventRecord): Promise<boolean> {
    return this.db.transaction(() => {
      const claimed = this.db
        .prepare(
          `INSERT INTO model_deprecation_announcements (model_id, shutdown_at, event_id) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
        )
        .run(modelId, shutdownAt, event.id).changes;
      if (claimed === 0) return false;
      insertEvent(this.db, event);
      return true;
    }).immediate();
  }

  async announcedDeprecations(): Promise<Set<string>> {
    const rows = this.db.prepare('SELECT model_id, shutdown_at FROM model_deprecation_announcements').all() as Row[];
    return new Set(rows.map((r) => `${String(r.model_id)} ${String(r.shutdown_at)}`));
  }
}
