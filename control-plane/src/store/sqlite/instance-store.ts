// SQLite implementation of the instance store. Placement claims, transitions and the
// events/charges they cause are written in one transaction each.
import { CLAIM_GPU, claimParams } from './gpu-claim.js';
import type Database from 'better-sqlite3';
import type { ChargeRecord, InstanceRecord, TransitionCharge } from '../../instances/instance-record.js';
import { onDemandLine, type OnDemandState } from '../../billing/accrual.js';
import type { InstanceStatus } from '../../instances/lifecycle.js';
import { ENDING_STATUSES, TERMINAL } from '../../instances/lifecycle.js';
import { GpuAlreadyClaimed, heldGpusQuery, OrgGpuQuotaExceeded, type AnswerWith, type InstancePage, type InstanceStore } from '../instance-store.js';
import type { AccountAdmission } from '../ledger-store.js';
import { admitOnAccount } from './ledger-store.js';
import { completeClaim } from './idempotency-store.js';
import type { EventRecord } from '../records.js';
import { insertEvent } from './event-rows.js';
import { newestFirstPage } from './newest-first-page.js';

type Row = Record<string, unknown>;

const COLUMNS: Record<keyof InstanceRecord, string> = {
  id: 'id',
  orgId: 'org_id',
  keyId: 'key_id',
  status: 'status',
  failureReason: 'failure_reason',
  sku: 'sku',
  gpus: 'gpus',
  pool: 'pool',
  mode: 'mode',
  durationHours: 'duration_hours',
  image: 'image',
  sshKeys: 'ssh_keys',
  labels: 'labels',
  nodeId: 'node_id',
  gpuUuids: 'gpu_uuids',
  rateMicros: 'rate_micros',
  progress: 'progress',
  createdAt: 'created_at',
  readyAt: 'ready_at',
  expiresAt: 'expires_at',
  terminatedAt: 'terminated_at',
  // The column keeps its first name; it now holds the stop until the container is gone.
  stop: 'pending_stop',
  access: 'access',
  updatedAt: 'updated_at',
};
const JSON_FIELDS = new Set<keyof InstanceRecord>(['sshKeys', 'labels', 'gpuUuids', 'progress', 'stop', 'access']);

export function toColumns(record: Partial<InstanceRecord>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(record) as Array<[keyof InstanceRecord, unknown]>) {
    out[COLUMNS[field]] = JSON_FIELDS.has(field) ? (value === null ? null : JSON.stringify(value)) : value;
  }
  return out;
}

export function toRecord(row: Row): InstanceRecord {
  const out: Record<string, unknown> = {};
  for (const [field, column] of Object.entries(COLUMNS) as Array<[keyof InstanceRecord, string]>) {
    const value = row[column];
    out[field] = JSON_FIELDS.has(field) && value !== null ? JSON.parse(String(value)) : value;
  }
  return out as unknown as InstanceRecord;
}

export function toCharge(row: Row): ChargeRecord {
  return {
    id: String(row.id),
    orgId: String(row.org_id),
    instanceId: String(row.instance_id),
    kind: row.kind as ChargeRecord['kind'],
    amountMicros: Number(row.amount_micros),
    description: String(row.description),
    createdAt: Number(row.created_at),
  };
}

/** The columns an on-demand line is priced from (billing/accrual.ts). */
export const ON_DEMAND_COLUMNS = 'org_id, sku, gpus, rate_micros, billed_seconds';

export function toOnDemandState(id: string, row: Row): OnDemandState {
  return { orgId: String(row.org_id), instanceId: id, sku: String(row.sku), gpus: Number(row.gpus), rateMicros: Number(row.rate_micros), billedSeconds: Number(row.billed_seconds) };
}

export class SqliteInstanceStore implements InstanceStore {
  constructor(private readonly db: Database.Database) {}

  private insertCharge(charge: TransitionCharge | null | undefined): void {
    if (!charge) return;
    if ('onDemandSeconds' in charge) {
      // Inside the transaction: what accruals billed already is not billed again.
      const row = this.db.prepare(`SELECT ${ON_DEMAND_COLUMNS} FROM instances WHERE id = ?`).get(charge.instanceId) as Row;
      const line = onDemandLine(toOnDemandState(charge.instanceId, row), charge.onDemandSeconds, { id: charge.id, createdAt: charge.createdAt, accrual: false });
      this.db.prepare('UPDATE instances SET billed_seconds = ? WHERE id = ?').run(charge.onDemandSeconds, charge.instanceId);
      if (!line) return;
      charge = line;
    }
    if ('refund' in charge) {
      const { total } = this.db.prepare('SELECT COALESCE(SUM(amount_micros), 0) AS total FROM charges WHERE instance_id = ?').get(charge.instanceId) as { total: number };
      if (total <= 0) return;
      charge = { id: charge.id, orgId: charge.orgId, instanceId: charge.instanceId, kind: 'refund', amountMicros: -total, description: charge.description, createdAt: charge.createdAt };
    }
    this.db
      .prepare('INSERT INTO charges (id, org_id, instance_id, kind, amount_micros, description, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)')
      .run(charge.id, charge.orgId, charge.instanceId, charge.kind, charge.amountMicros, charge.description, charge.createdAt);
  }

  private getSync(id: string): InstanceRecord | undefined {
    const row = this.db.prepare('SELECT * FROM instances WHERE id = ?').get(id) as Row | undefined;
    return row && toRecord(row);
  }

  async create(instance: InstanceRecord, event: EventRecord, charge: ChargeRecord | null, answer?: AnswerWith, gpuQuota?: number, upFront?: AccountAdmission): Promise<void> {
    this.db.transaction(() => {
      if (gpuQuota !== undefined) {
        // An immediate transaction: no other writer runs between this count and the insert.
        const held = Number((this.db.prepare(heldGpusQuery('?')).get(instance.orgId) as { held: number }).held);
        if (held + instance.gpus > gpuQuota) throw new OrgGpuQuotaExceeded(held, gpuQuota);
      }
      admitOnAccount(this.db, instance.orgId, upFront);
      // gpu_claims' primary key makes a second claim of one GPU impossible, across processes too.
      const claim = this.db.prepare(CLAIM_GPU);
      for (const uuid of instance.gpuUuids) {
        if (claim.run(claimParams(uuid, instance.nodeId, instance.id, instance.createdAt)).changes === 0) throw new GpuAlreadyClaimed(uuid);
      }
      const columns = toColumns(instance);
      const names = Object.keys(columns);
      this.db.prepare(`INSERT INTO instances (${names.join(', ')}) VALUES (${names.map((n) => `@${n}`).join(', ')})`).run(columns);
      insertEvent(this.db, event);
      this.insertCharge(charge);
      completeClaim(this.db, answer?.(instance));
    }).immediate();
  }

  async get(id: string): Promise<InstanceRecord | undefined> {
    return this.getSync(id);
  }

  async list(orgId: string, options: { statuses?: InstanceStatus[]; limit: number; after?: string }): Promise<InstancePage> {
    const statuses = options.statuses ?? [];
    const page = newestFirstPage(this.db, {
      table: 'instances',
      orgId,
      where: statuses.length > 0 ? [`status IN (${statuses.map((_, i) => `@s${i}`).join(', ')})`] : [],
      params: Object.fromEntries(statuses.map((s, i) => [`s${i}`, s])),
      limit: options.limit,
      after: options.after,
    });
    return { data: page.rows.map(toRecord), hasMore: page.hasMore };
  }

  async listActiveOnNode(nodeId: string): Promise<InstanceRecord[]> {
    const rows = this.db.prepare(`SELECT * FROM instances WHERE node_id = ? AND status NOT IN ('terminated', 'failed')`).all(nodeId) as Row[];
    return rows.map(toRecord);
  }

  async listActive(): Promise<InstanceRecord[]> {
    const rows = this.db.prepare(`SELECT * FROM instances WHERE status NOT IN ('terminated', 'failed')`).all() as Row[];
    return rows.map(toRecord);
  }

  async transition(
    id: string,
    from: InstanceStatus,
    next: Partial<InstanceRecord> & { status: InstanceStatus; updatedAt: number },
    event: (updated: InstanceRecord) => EventRecord,
    charge: TransitionCharge | null,
    expiredBy?: number,
  ): Promise<InstanceRecord | undefined> {
    return this.db.transaction(() => {
      const columns = toColumns(next);
      const sets = Object.keys(columns).map((c) => `${c} = @${c}`).join(', ');
      const expired = expiredBy === undefined ? '' : ' AND expires_at <= @__expiredBy';
      const changed = this.db
        .prepare(`UPDATE instances SET ${sets} WHERE id = @__id AND status = @__from${expired}`)
        .run({ ...columns, __id: id, __from: from, ...(expiredBy === undefined ? {} : { __expiredBy: expiredBy }) });
      if (changed.changes === 0) return undefined;
      this.db
        .prepare('INSERT INTO instance_transitions (instance_id, at, from_status, to_status, reason) VALUES (?, ?, ?, ?, ?)')
        .run(id, next.updatedAt, from, next.status, next.failureReason ?? null);
      if (TERMINAL.has(next.status)) this.db.prepare('DELETE FROM gpu_claims WHERE owner = ?').run(id);
      const updated = this.getSync(id)!;
      insertEvent(this.db, event(updated));
      this.insertCharge(charge);
      return updated;
    }).immediate();
  }

  async accrueOnDemand(id: string, totalSeconds: number, line: { id: string; createdAt: number }): Promise<ChargeRecord | undefined> {
    return this.db.transaction((): ChargeRecord | undefined => {
      const row = this.db
        .prepare(`SELECT ${ON_DEMAND_COLUMNS} FROM instances WHERE id = ? AND mode = 'on_demand' AND status IN ('ready', 'draining')`)
        .get(id) as Row | undefined;
      if (!row) return undefined;
      const state = toOnDemandState(id, row);
      const charge = onDemandLine(state, totalSeconds, { ...line, accrual: true });
      if (!charge) return undefined;
      // A compare-and-set on the mark, as on PostgreSQL (SQLite's writers are serialized anyway).
      const moved = this.db.prepare('UPDATE instances SET billed_seconds = ? WHERE id = ? AND billed_seconds = ?').run(totalSeconds, id, state.billedSeconds);
      if (moved.changes === 0) return undefined;
      this.insertCharge(charge);
      return charge;
    }).immediate();
  }

  async update(
    id: string,
    patch: Partial<Pick<InstanceRecord, 'progress' | 'stop' | 'access' | 'updatedAt'>>,
    charge: ChargeRecord | null = null,
    answer?: AnswerWith,
  ): Promise<InstanceRecord | undefined> {
    return this.db.transaction(() => {
      const columns = toColumns(patch);
      const names = Object.keys(columns);
      if (names.length > 0) this.db.prepare(`UPDATE instances SET ${names.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @__id`).run({ ...columns, __id: id });
      this.insertCharge(charge);
      const updated = this.getSync(id);
      if (updated) completeClaim(this.db, answer?.(updated));
      return updated;
    }).immediate();
  }

  async extend(id: string, extension: { hours: number; maxTotalHours: number; now: number }, charge: ChargeRecord, answer?: AnswerWith, upFront?: AccountAdmission): Promise<InstanceRecord | undefined> {
    return this.db.transaction(() => {
      const changed = this.db
        .prepare(
          `UPDATE instances SET duration_hours = duration_hours + @hours, expires_at = expires_at + @ms, updated_at = @now
           WHERE id = @id AND mode = 'reserved' AND status NOT IN (SELECT value FROM json_each(@ending)) AND expires_at > @now AND duration_hours + @hours <= @max`,
        )
        .run({ id, hours: extension.hours, ms: Math.round(extension.hours * 3_600_000), now: extension.now, ending: JSON.stringify(ENDING_STATUSES), max: extension.maxTotalHours });
      if (changed.changes === 0) return undefined;
      admitOnAccount(this.db, charge.orgId, upFront);
      this.insertCharge(charge);
      const updated = this.getSync(id)!;
      completeClaim(this.db, answer?.(updated));
      return updated;
    }).immediate();
  }

  async claimedGpuUuids(): Promise<Set<string>> {
    const rows = this.db.prepare('SELECT gpu_uuid FROM gpu_claims').all() as Array<{ gpu_uuid: string }>;
    return new Set(rows.map((r) => r.gpu_uuid));
  }

  async listCharges(orgId: string, options: { limit: number; after?: string }): Promise<{ data: ChargeRecord[]; hasMore: boolean }> {
    const page = newestFirstPage(this.db, { table: 'charges', orgId, limit: options.limit, after: options.after });
    return { data: page.rows.map(toCharge), hasMore: page.hasMore };
  }

  async chargesFor(instanceId: string): Promise<ChargeRecord[]> {
    return (this.db.prepare('SELECT * FROM charges WHERE instance_id = ? ORDER BY created_at, rowid').all(instanceId) as Row[]).map(toCharge);
  }
}
