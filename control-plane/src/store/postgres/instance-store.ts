// PostgreSQL implementation of the instance store. Placement claims, transitions and
// the events/charges they cause are written in one transaction each. A transition is a
// compare-and-set on the status: a concurrent one waits for the row and then finds the
// status changed, exactly as with SQLite's serialized writers.
import type pg from 'pg';
import type { ChargeRecord, InstanceRecord, TransitionCharge } from '../../instances/instance-record.js';
import { onDemandLine } from '../../billing/accrual.js';
import type { InstanceStatus } from '../../instances/lifecycle.js';
import { ENDING_STATUSES, TERMINAL } from '../../instances/lifecycle.js';
import { GpuAlreadyClaimed, heldGpusQuery, OrgGpuQuotaExceeded, type AnswerWith, type InstancePage, type InstanceStore } from '../instance-store.js';
import type { AccountAdmission } from '../ledger-store.js';
import { admitOnAccount } from './ledger-store.js';
import type { EventRecord } from '../records.js';
import { ON_DEMAND_COLUMNS, toCharge, toColumns, toOnDemandState, toRecord } from '../sqlite/instance-store.js';
import { completeClaim } from './idempotency-store.js';
import { insertEvent } from './event-rows.js';
import { newestFirstPage } from './newest-first-page.js';
import { all, inTransaction, one, run, type Queryable } from './pg-pool.js';

/** `SET a = $k, b = $k+1, …` for `columns`, numbering from `first`. */
export function assignments(columns: Record<string, unknown>, first: number): { sets: string; values: unknown[] } {
  const names = Object.keys(columns);
  return { sets: names.map((n, i) => `${n} = $${first + i}`).join(', '), values: names.map((n) => columns[n]) };
}

export async function insertRow(db: Queryable, table: string, columns: Record<string, unknown>): Promise<void> {
  const names = Object.keys(columns);
  await run(db, `INSERT INTO ${table} (${names.join(', ')}) VALUES (${names.map((_, i) => `$${i + 1}`).join(', ')})`, Object.values(columns));
}

/** Claims every GPU for `owner` inside the caller's transaction; throws GpuAlreadyClaimed on the first taken one. */
export async function claimAll(client: pg.ClientBase, nodeId: string | null, uuids: readonly string[], owner: string, at: number): Promise<void> {
  for (const uuid of uuids) {
    // gpu_claims' primary key makes a second claim of one GPU impossible, across replicas
    // too; a GPU now unhealthy, or a node no longer schedulable, takes none (sqlite/gpu-claim.ts).
    const claimed = await run(
      client,
      `INSERT INTO gpu_claims (gpu_uuid, node_id, owner, claimed_at)
       SELECT $1, $2, $3, $4
       WHERE NOT EXISTS (SELECT 1 FROM node_gpus WHERE uuid = $1 AND NOT healthy)
         AND NOT EXISTS (SELECT 1 FROM nodes WHERE id = $2 AND (status <> 'ready' OR cordoned OR draining OR forgotten_at IS NOT NULL))
       ON CONFLICT DO NOTHING`,
      [uuid, nodeId, owner, at],
    );
    if (claimed === 0) throw new GpuAlreadyClaimed(uuid);
  }
}

export class PgInstanceStore implements InstanceStore {
  constructor(private readonly pool: pg.Pool) {}

  private async insertCharge(client: pg.ClientBase, charge: TransitionCharge | null | undefined): Promise<void> {
    if (!charge) return;
    if ('onDemandSeconds' in charge) {
      // The row is locked by this transaction (its transition): a concurrent accrual either
      // committed before (and is read here) or waits and then finds the instance ended.
      const row = (await one(client, `SELECT ${ON_DEMAND_COLUMNS} FROM instances WHERE id = $1 FOR UPDATE`, [charge.instanceId]))!;
      const line = onDemandLine(toOnDemandState(charge.instanceId, row), charge.onDemandSeconds, { id: charge.id, createdAt: charge.createdAt, accrual: false });
      await run(client, 'UPDATE instances SET billed_seconds = $2 WHERE id = $1', [charge.instanceId, charge.onDemandSeconds]);
      if (!line) return;
      charge = line;
    }
    if ('refund' in charge) {
      const total = Number((await one(client, 'SELECT COALESCE(SUM(amount_micros), 0)::bigint AS total FROM charges WHERE instance_id = $1', [charge.instanceId]))!.total);
      if (total <= 0) return;
      charge = { id: charge.id, orgId: charge.orgId, instanceId: charge.instanceId, kind: 'refund', amountMicros: -total, description: charge.description, createdAt: charge.createdAt };
    }
    await run(client, 'INSERT INTO charges (id, org_id, instance_id, kind, amount_micros, description, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      charge.id,
      charge.orgId,
      charge.instanceId,
      charge.kind,
      charge.amountMicros,
      charge.description,
      charge.createdAt,
    ]);
  }

  private async getOn(db: Queryable, id: string): Promise<InstanceRecord | undefined> {
    const row = await one(db, 'SELECT * FROM instances WHERE id = $1', [id]);
    return row && toRecord(row);
  }

  async create(instance: InstanceRecord, event: EventRecord, charge: ChargeRecord | null, answer?: AnswerWith, gpuQuota?: number, upFront?: AccountAdmission): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      if (gpuQuota !== undefined) {
        // One create per org at a time, across replicas, from this count to the commit.
        await client.query("SELECT pg_advisory_xact_lock(hashtextextended('svc-org-gpus:' || $1, 0))", [instance.orgId]);
        const held = Number((await one(client, heldGpusQuery('$1'), [instance.orgId]))!.held);
        if (held + instance.gpus > gpuQuota) throw new OrgGpuQuotaExceeded(held, gpuQuota);
      }
      // After the GPU quota's lock, always in this order, so two creates never wait on each other crosswise.
      await admitOnAccount(client, instance.orgId, upFront);
      await claimAll(client, instance.nodeId, instance.gpuUuids, instance.id, instance.createdAt);
      await insertRow(client, 'instances', toColumns(instance));
      await insertEvent(client, event);
      await this.insertCharge(client, charge);
      await completeClaim(client, answer?.(instance));
    });
  }

  async get(id: string): Promise<InstanceRecord | undefined> {
    return this.getOn(this.pool, id);
  }

  async list(orgId: string, options: { statuses?: InstanceStatus[]; limit: number; after?: string }): Promise<InstancePage> {
    const statuses = options.statuses ?? [];
    const page = await newestFirstPage(this.pool, {
      table: 'instances',
      orgId,
      where: statuses.length > 0 ? ['status = ANY($2::text[])'] : [],
      params: statuses.length > 0 ? [statuses] : [],
      limit: options.limit,
      after: options.after,
    });
    return { data: page.rows.map(toRecord), hasMore: page.hasMore };
  }

  async listActiveOnNode(nodeId: string): Promise<InstanceRecord[]> {
    return (await all(this.pool, `SELECT * FROM instances WHERE node_id = $1 AND status NOT IN ('terminated', 'failed')`, [nodeId])).map(toRecord);
  }

  async listActive(): Promise<InstanceRecord[]> {
    return (await all(this.pool, `SELECT * FROM instances WHERE status NOT IN ('terminated', 'failed')`)).map(toRecord);
  }

  async transition(
    id: string,
    from: InstanceStatus,
    next: Partial<InstanceRecord> & { status: InstanceStatus; updatedAt: number },
    event: (updated: InstanceRecord) => EventRecord,
    charge: TransitionCharge | null,
    expiredBy?: number,
  ): Promise<InstanceRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      const { sets, values } = assignments(toColumns(next), 3);
      const expired = expiredBy === undefined ? '' : ` AND expires_at <= $${3 + values.length}`;
      const changed = await run(client, `UPDATE instances SET ${sets} WHERE id = $1 AND status = $2${expired}`, [id, from, ...values, ...(expiredBy === undefined ? [] : [expiredBy])]);
      if (changed === 0) return undefined;
      await run(client, 'INSERT INTO instance_transitions (instance_id, at, from_status, to_status, reason) VALUES ($1, $2, $3, $4, $5)', [
        id,
        next.updatedAt,
        from,
        next.status,
        next.failureReason ?? null,
      ]);
      if (TERMINAL.has(next.status)) await run(client, 'DELETE FROM gpu_claims WHERE owner = $1', [id]);
      const updated = (await this.getOn(client, id))!;
      await insertEvent(client, event(updated));
      await this.insertCharge(client, charge);
      return updated;
    });
  }

  async accrueOnDemand(id: string, totalSeconds: number, line: { id: string; createdAt: number }): Promise<ChargeRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      // The row lock orders this against a transition of the instance: after waiting for
      // one, the status is read again, so an instance that just ended is not billed here.
      const row = await one(client, `SELECT ${ON_DEMAND_COLUMNS} FROM instances WHERE id = $1 AND mode = 'on_demand' AND status IN ('ready', 'draining') FOR UPDATE`, [id]);
      if (!row) return undefined;
      const state = toOnDemandState(id, row);
      const charge = onDemandLine(state, totalSeconds, { ...line, accrual: true });
      if (!charge) return undefined;
      await run(client, 'UPDATE instances SET billed_seconds = $2 WHERE id = $1', [id, totalSeconds]);
      await this.insertCharge(client, charge);
      return charge;
    });
  }

  async update(
    id: string,
    patch: Partial<Pick<InstanceRecord, 'progress' | 'stop' | 'access' | 'updatedAt'>>,
    charge: ChargeRecord | null = null,
    answer?: AnswerWith,
  ): Promise<InstanceRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      const columns = toColumns(patch);
      if (Object.keys(columns).length > 0) {
        const { sets, values } = assignments(columns, 2);
        await run(client, `UPDATE instances SET ${sets} WHERE id = $1`, [id, ...values]);
      } else {
        // Charges of one instance are written one transaction at a time, as with SQLite.
        await run(client, 'SELECT 1 FROM instances WHERE id = $1 FOR UPDATE', [id]);
      }
      await this.insertCharge(client, charge);
      const updated = await this.getOn(client, id);
      if (updated) await completeClaim(client, answer?.(updated));
      return updated;
    });
  }

  async extend(id: string, extension: { hours: number; maxTotalHours: number; now: number }, charge: ChargeRecord, answer?: AnswerWith, upFront?: AccountAdmission): Promise<InstanceRecord | undefined> {
    return inTransaction(this.pool, async (client) => {
      // One conditional statement: concurrent extensions queue on the row and each adds its hours to what the last left.
      const changed = await run(
        client,
        `UPDATE instances SET duration_hours = duration_hours + $2, expires_at = expires_at + $3, updated_at = $4
         WHERE id = $1 AND mode = 'reserved' AND status <> ALL($5::text[]) AND expires_at > $4 AND duration_hours + $2 <= $6`,
        [id, extension.hours, Math.round(extension.hours * 3_600_000), extension.now, ENDING_STATUSES, extension.maxTotalHours],
      );
      if (changed === 0) return undefined;
      await admitOnAccount(client, charge.orgId, upFront);
      await this.insertCharge(client, charge);
      const updated = (await this.getOn(client, id))!;
      await completeClaim(client, answer?.(updated));
      return updated;
    });
  }

  async claimedGpuUuids(): Promise<Set<string>> {
    return new Set((await all(this.pool, 'SELECT gpu_uuid FROM gpu_claims')).map((r) => String(r.gpu_uuid)));
  }

  async listCharges(orgId: string, options: { limit: number; after?: string }): Promise<{ data: ChargeRecord[]; hasMore: boolean }> {
    const page = await newestFirstPage(this.pool, { table: 'charges', orgId, limit: options.limit, after: options.after });
    return { data: page.rows.map(toCharge), hasMore: page.hasMore };
  }

  async chargesFor(instanceId: string): Promise<ChargeRecord[]> {
    return (await all(this.pool, 'SELECT * FROM charges WHERE instance_id = $1 ORDER BY created_at, ord', [instanceId])).map(toCharge);
  }
}
