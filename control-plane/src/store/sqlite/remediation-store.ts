// SQLite implementation of RemediationStore: apply() is one transaction.
import type Database from 'better-sqlite3';
import type { RemediationChange, RemediationRecord, RemediationStore } from '../remediation-store.js';
import type { StoredHealthEvent } from '../node-store.js';
import { insertEvent } from './event-rows.js';
import { toHealthEvent } from './node-store.js';

type Db = Database.Database;
type Row = Record<string, unknown>;

const orNull = <T>(value: unknown, as: (v: unknown) => T): T | null => (value === null || value === undefined ? null : as(value));

export function toRecord(row: Row): RemediationRecord {
  return {
    id: String(row.id),
    nodeId: String(row.node_id),
    gpuUuid: orNull(row.gpu_uuid, String),
    gpuIndex: orNull(row.gpu_index, Number),
    xid: orNull(row.xid, Number),
    action: String(row.action) as RemediationRecord['action'],
    kind: String(row.kind) as RemediationRecord['kind'],
    stage: String(row.stage) as RemediationRecord['stage'],
    fault: String(row.fault),
    detail: String(row.detail),
    commandId: orNull(row.command_id, String),
    holders: JSON.parse(String(row.holders)) as string[],
    triggerSeq: Number(row.trigger_seq),
    openedAt: Number(row.opened_at),
    updatedAt: Number(row.updated_at),
    closedAt: orNull(row.closed_at, Number),
    outcome: orNull(row.outcome, String),
  };
}

export class SqliteRemediationStore implements RemediationStore {
  private readonly applyTx;

  constructor(private readonly db: Db) {
    const upsert = db.prepare(
      `INSERT INTO gpu_remediations (id, node_id, gpu_uuid, gpu_index, xid, action, kind, stage, fault, detail, command_id,
         holders, trigger_seq, opened_at, updated_at, closed_at, outcome)
       VALUES (@id, @nodeId, @gpuUuid, @gpuIndex, @xid, @action, @kind, @stage, @fault, @detail, @commandId,
         @holders, @triggerSeq, @openedAt, @updatedAt, @closedAt, @outcome)
       ON CONFLICT (id) DO UPDATE SET xid = excluded.xid, kind = excluded.kind, action = excluded.action, stage = excluded.stage,
         fault = excluded.fault, detail = excluded.detail, command_id = excluded.command_id, holders = excluded.holders,
         updated_at = excluded.updated_at, closed_at = excluded.closed_at, outcome = excluded.outcome`,
    );
    const timeline = db.prepare(
      `INSERT INTO node_health_events (node_id, gpu_uuid, gpu_index, kind, xid, healthy, message, at)
       VALUES (@nodeId, @gpuUuid, @gpuIndex, @kind, @xid, @healthy, @message, @at)`,
    );
    const command = db.prepare(
      `INSERT INTO node_commands (id, node_id, kind, args, state, created_at, sent_at, finished_at, error_code, error_message)
       VALUES (@id, @nodeId, @kind, @args, @state, @createdAt, NULL, NULL, NULL, NULL)`,
    );
    const cursor = db.prepare('UPDATE remediation_cursor SET seq = MAX(seq, ?) WHERE id = 1');
    const drain = db.prepare('UPDATE nodes SET cordoned = 1, draining = 1 WHERE id = ?');
    this.applyTx = db.transaction((change: RemediationChange) => {
      for (const r of change.records ?? []) upsert.run({ ...r, holders: JSON.stringify(r.holders) });
      for (const t of change.timeline ?? []) timeline.run({ ...t, healthy: t.healthy === null ? null : t.healthy ? 1 : 0 });
      for (const e of change.events ?? []) insertEvent(db, e);
      if (change.command) command.run({ ...change.command, args: JSON.stringify(change.command.args) });
      if (change.drainNode) drain.run(change.drainNode);
      if (change.cursor !== undefined) cursor.run(change.cursor);
    });
  }

  async cursor(): Promise<number> {
    const row = this.db.prepare('SELECT seq FROM remediation_cursor WHERE id = 1').get() as { seq: number } | undefined;
    return row?.seq ?? 0;
  }

  async healthEventsAfter(seq: number, limit: number): Promise<StoredHealthEvent[]> {
    return (this.db.prepare('SELECT * FROM node_health_events WHERE seq > ? ORDER BY seq LIMIT ?').all(seq, limit) as Row[]).map(toHealthEvent);
  }

  async listOpen(): Promise<RemediationRecord[]> {
    return (this.db.prepare("SELECT * FROM gpu_remediations WHERE stage <> 'closed' ORDER BY opened_at, id").all() as Row[]).map(toRecord);
  }

  async list(filter: { nodeId?: string; gpuUuid?: string; limit: number }): Promise<RemediationRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.nodeId !== undefined) (where.push('node_id = ?'), args.push(filter.nodeId));
    if (filter.gpuUuid !== undefined) (where.push('gpu_uuid = ?'), args.push(filter.gpuUuid));
    const sql = `SELECT * FROM gpu_remediations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY opened_at DESC, id DESC LIMIT ?`;
    return (this.db.prepare(sql).all(...args, filter.limit) as Row[]).map(toRecord);
  }

  async apply(change: RemediationChange): Promise<void> {
    this.applyTx.immediate(change);
  }
}
