// PostgreSQL implementation of the webhook store: subscriptions, secrets, the delivery
// outbox (fan-out cursor, deliveries, attempts) and announced deprecations. The fan-out
// cursor row is locked for the step, so two replicas never fan one event out twice;
// events commit in seq order (see event-rows.ts), so the cursor never passes one.
import type pg from 'pg';
import type { EventRecord, StoredEvent } from '../records.js';
import type {
  AttemptRecord,
  AttemptResult,
  DeliveryHistory,
  DeliveryRecord,
  DueDelivery,
  NewDelivery,
  WebhookSecretRecord,
  WebhookStore,
  WebhookSubscriptionRecord,
} from '../../webhooks/webhook-store.js';
import { LISTED_ATTEMPTS_PER_DELIVERY } from '../../webhooks/webhook-store.js';
import { prefixed, toAttempt, toDelivery, toSecret, toSubscription } from '../sqlite/webhook-store.js';
import { toEvent } from '../sqlite/event-rows.js';
import { insertEvent, lockEvents } from './event-rows.js';
import { all, inTransaction, one, run, type Queryable } from './pg-pool.js';

async function insertSecret(db: Queryable, secret: WebhookSecretRecord): Promise<void> {
  await run(db, 'INSERT INTO webhook_secrets (subscription_id, secret, created_at, expires_at) VALUES ($1, $2, $3, $4)', [
    secret.subscriptionId,
    secret.secret,
    secret.createdAt,
    secret.expiresAt,
  ]);
}

export class PgWebhookStore implements WebhookStore {
  constructor(private readonly pool: pg.Pool) {}

  async createSubscription(
    subscription: Omit<WebhookSubscriptionRecord, 'fromSeq'>,
    secret: WebhookSecretRecord,
    mayAdd?: (held: number) => void,
  ): Promise<WebhookSubscriptionRecord> {
    return inTransaction(this.pool, async (client) => {
      // Under the events lock: no event can commit between this read and our commit, so
      // every later event is fanned out after the subscription exists. Creates take it
      // one at a time, so the count below sees every subscription committed before.
      await lockEvents(client);
      if (mayAdd) {
        mayAdd(Number((await one(client, 'SELECT count(*) AS n FROM webhook_subscriptions WHERE org_id = $1', [subscription.orgId]))!.n));
      }
      const fromSeq = Number((await one(client, 'SELECT COALESCE(MAX(seq), 0) AS seq FROM events'))!.seq);
      await run(
        client,
        `INSERT INTO webhook_subscriptions (id, org_id, url, event_types, description, status, disabled_reason, created_at, from_seq)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
        [
          subscription.id,
          subscription.orgId,
          subscription.url,
          JSON.stringify(subscription.eventTypes),
          subscription.description,
          subscription.status,
          subscription.disabledReason,
          subscription.createdAt,
          fromSeq,
        ],
      );
      await insertSecret(client, secret);
      return { ...subscription, fromSeq };
    });
  }

  async getSubscription(id: string): Promise<WebhookSubscriptionRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM webhook_subscriptions WHERE id = $1', [id]);
    return row && toSubscription(row);
  }

  async listSubscriptions(orgId?: string): Promise<WebhookSubscriptionRecord[]> {
    const rows = orgId
      ? await all(this.pool, 'SELECT * FROM webhook_subscriptions WHERE org_id = $1 ORDER BY created_at, id', [orgId])
      : await all(this.pool, 'SELECT * FROM webhook_subscriptions ORDER BY created_at, id');
    return rows.map(toSubscription);
  }

  async deleteSubscription(id: string): Promise<boolean> {
    // Attempts, deliveries and secrets go with it (ON DELETE CASCADE).
    return (await run(this.pool, 'DELETE FROM webhook_subscriptions WHERE id = $1', [id])) === 1;
  }

  async rotateSecret(id: string, secret: WebhookSecretRecord, oldExpiresAt: number): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      if (!(await one(client, 'SELECT 1 FROM webhook_subscriptions WHERE id = $1 FOR UPDATE', [id]))) return false;
      // The current secret signs on until oldExpiresAt; one an earlier rotation left signing stops now.
      await run(
        client,
        `UPDATE webhook_secrets SET expires_at = CASE WHEN expires_at IS NULL THEN $1::bigint ELSE LEAST(expires_at, $3::bigint) END
         WHERE subscription_id = $2 AND (expires_at IS NULL OR expires_at > $3::bigint)`,
        [oldExpiresAt, id, secret.createdAt],
      );
      await insertSecret(client, secret);
      return true;
    });
  }

  async activeSecrets(id: string, now: number): Promise<WebhookSecretRecord[]> {
    const rows = await all(
      this.pool,
      'SELECT * FROM webhook_secrets WHERE subscription_id = $1 AND (expires_at IS NULL OR expires_at > $2) ORDER BY created_at DESC, id DESC',
      [id, now],
    );
    return rows.map(toSecret);
  }

  async fanOut(
    limit: number,
    plan: (events: StoredEvent[], subscriptions: WebhookSubscriptionRecord[]) => NewDelivery[],
  ): Promise<number> {
    return inTransaction(this.pool, async (client) => {
      const cursor = Number((await one(client, 'SELECT last_seq FROM webhook_fan_out_cursor WHERE id = 1 FOR UPDATE'))!.last_seq);
      const events = (await all(client, 'SELECT * FROM events WHERE seq > $1 ORDER BY seq LIMIT $2', [cursor, limit])).map(toEvent);
      if (events.length === 0) return 0;
      const subscriptions = (await all(client, `SELECT * FROM webhook_subscriptions WHERE status = 'enabled'`)).map(toSubscription);
      const deliveries = plan(events, subscriptions);
      if (deliveries.length > 0) {
        await run(
          client,
          `INSERT INTO webhook_deliveries (id, subscription_id, event_seq, subject, status, next_attempt_at, created_at)
           SELECT id, sub, seq, subject, 'pending', next_at, created_at
           FROM unnest($1::text[], $2::text[], $3::bigint[], $4::text[], $5::bigint[], $6::bigint[]) AS d(id, sub, seq, subject, next_at, created_at)
           ON CONFLICT DO NOTHING`,
          [
            deliveries.map((d) => d.id),
            deliveries.map((d) => d.subscriptionId),
            deliveries.map((d) => d.eventSeq),
            deliveries.map((d) => d.subject),
            deliveries.map((d) => d.nextAttemptAt),
            deliveries.map((d) => d.createdAt),
          ],
        );
      }
      await run(client, 'UPDATE webhook_fan_out_cursor SET last_seq = $1 WHERE id = 1', [events.at(-1)!.seq]);
      return events.length;
    });
  }

  async deliveryBacklog(): Promise<{ pending: number; oldestCreatedAt: number | null }> {
    const row = (await one(
      this.pool,
      `SELECT count(*) AS pending, min(d.created_at) AS oldest
         FROM webhook_deliveries d
         JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.status = 'enabled'
        WHERE d.status = 'pending'`,
    ))!;
    return { pending: Number(row.pending), oldestCreatedAt: row.oldest === null ? null : Number(row.oldest) };
  }

  async dueDeliveries(now: number, limit: number, excludeOrgs: readonly string[] = []): Promise<DueDelivery[]> {
    const rows = await all(
      this.pool,
      `SELECT d.*,
              s.id AS s_id, s.org_id AS s_org_id, s.url AS s_url, s.event_types AS s_event_types,
              s.description AS s_description, s.status AS s_status, s.disabled_reason AS s_disabled_reason,
              s.created_at AS s_created_at, s.from_seq AS s_from_seq,
              e.seq AS e_seq, e.id AS e_id, e.type AS e_type, e.org_id AS e_org_id, e.subject AS e_subject,
              e.data AS e_data, e.created_at AS e_created_at
       FROM webhook_deliveries d
       JOIN webhook_subscriptions s ON s.id = d.subscription_id AND s.status = 'enabled'
       JOIN events e ON e.seq = d.event_seq
       WHERE d.status = 'pending' AND d.next_attempt_at <= $1 AND NOT (s.org_id = ANY($3::text[]))
         AND (d.subject IS NULL OR NOT EXISTS (
           SELECT 1 FROM webhook_deliveries p
           WHERE p.subscription_id = d.subscription_id AND p.subject = d.subject
             AND p.status = 'pending' AND p.event_seq < d.event_seq))
       ORDER BY d.next_attempt_at, d.event_seq
       LIMIT $2`,
      [now, limit, excludeOrgs],
    );
    return rows.map((row) => ({
      delivery: toDelivery(row),
      subscription: toSubscription(prefixed(row, 's_')),
      event: toEvent(prefixed(row, 'e_')),
    }));
  }

  async recordAttempt(attempt: AttemptRecord, result: AttemptResult): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      const delivery = await one(client, 'SELECT subscription_id FROM webhook_deliveries WHERE id = $1 FOR UPDATE', [attempt.deliveryId]);
      // Deleted with its subscription while the attempt was in flight: nothing to record.
      if (!delivery) return;
      await run(
        client,
        `INSERT INTO webhook_attempts (delivery_id, attempt, started_at, duration_ms, status_code, error, next_attempt_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7)`,
        [attempt.deliveryId, attempt.attempt, attempt.startedAt, attempt.durationMs, attempt.statusCode, attempt.error, attempt.nextAttemptAt],
      );
      const finishedAt = result.status === 'pending' ? null : attempt.startedAt + attempt.durationMs;
      await run(
        client,
        `UPDATE webhook_deliveries
         SET status = $1, attempt_count = GREATEST(attempt_count, $2), failed_in_run = $3, next_attempt_at = $4, finished_at = $5
         WHERE id = $6`,
        [result.status, attempt.attempt, result.failedInRun, result.nextAttemptAt, finishedAt, attempt.deliveryId],
      );
      if (result.disableReason !== undefined) {
        await run(client, `UPDATE webhook_subscriptions SET status = 'disabled', disabled_reason = $1 WHERE id = $2`, [
          result.disableReason,
          delivery.subscription_id,
        ]);
      }
    });
  }

  async getDelivery(id: string): Promise<DeliveryRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM webhook_deliveries WHERE id = $1', [id]);
    return row && toDelivery(row);
  }

  async listDeliveries(subscriptionId: string, options: { limit: number; after?: string }): Promise<DeliveryHistory[]> {
    const rows = await all(
      this.pool,
      `SELECT d.*, e.id AS event_id, e.type AS event_type FROM webhook_deliveries d
       JOIN events e ON e.seq = d.event_seq
       WHERE d.subscription_id = $1
         AND ($2::text IS NULL OR d.event_seq < (SELECT event_seq FROM webhook_deliveries WHERE id = $2))
       ORDER BY d.event_seq DESC LIMIT $3`,
      [subscriptionId, options.after ?? null, options.limit],
    );
    // Each delivery's latest attempts only, read backwards along the (delivery_id, attempt) index.
    const attempts =
      rows.length === 0
        ? []
        : await all(
            this.pool,
            `SELECT a.* FROM unnest($1::text[]) AS d(id)
             CROSS JOIN LATERAL (SELECT * FROM webhook_attempts WHERE delivery_id = d.id ORDER BY attempt DESC, id DESC LIMIT $2) a
             ORDER BY a.attempt, a.id`,
            [rows.map((r) => r.id), LISTED_ATTEMPTS_PER_DELIVERY],
          );
    return rows.map((row) => ({
      delivery: toDelivery(row),
      eventId: String(row.event_id),
      eventType: String(row.event_type),
      attempts: attempts.filter((a) => a.delivery_id === row.id).map(toAttempt),
    }));
  }

  async attemptsSince(deliveryId: string, since: number): Promise<{ count: number; oldestAt: number | null }> {
    const row = (await one(
      this.pool,
      'SELECT count(*) AS n, min(started_at) AS oldest FROM webhook_attempts WHERE delivery_id = $1 AND started_at >= $2',
      [deliveryId, since],
    ))!;
    return { count: Number(row.n), oldestAt: row.oldest === null ? null : Number(row.oldest) };
  }

  async redeliver(id: string, at: number): Promise<DeliveryRecord | undefined> {
    const row = await one(
      this.pool,
      `UPDATE webhook_deliveries SET status = 'pending', failed_in_run = 0, next_attempt_at = $1, finished_at = NULL WHERE id = $2 RETURNING *`,
      [at, id],
    );
    return row && toDelivery(row);
  }

  async announceDeprecation(modelId: string, shutdownAt: string, event: EventRecord): Promise<boolean> {
    return inTransaction(this.pool, async (client) => {
      const claimed = await run(
        client,
        'INSERT INTO model_deprecation_announcements (model_id, shutdown_at, event_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING',
        [modelId, shutdownAt, event.id],
      );
      if (claimed === 0) return false;
      await insertEvent(client, event);
      return true;
    });
  }

  async announcedDeprecations(): Promise<Set<string>> {
    const rows = await all(this.pool, 'SELECT model_id, shutdown_at FROM model_deprecation_announcements');
    return new Set(rows.map((r) => `${String(r.model_id)} ${String(r.shutdown_at)}`));
  }
}
