// PostgreSQL implementation of RemediationStore: apply() is one transaction. Its locks
// are taken in the order every other writer uses (rows, then the health timeline, then
// the events outbox), so a remediation step and an agent's report never deadlock.
import type pg from 'pg';
import type { RemediationChange, RemediationRecord, RemediationStore } from '../remediation-store.js';
import type { StoredHealthEvent } from '../node-store.js';
import { toRecord } from '../sqlite/remediation-store.js';
import { toHealthEvent } from '../sqlite/node-store.js';
import { insertEvent } from './event-rows.js';
import { appendEvent } from './node-store.js';
import { all, inTransaction, one, run } from './pg-pool.js';

export class PgRemediationStore implements RemediationStore {
  constructor(private readonly pool: pg.Pool) {}

  async cursor(): Promise<number> {
    const row = await one(this.pool, 'SELECT seq FROM remediation_cursor WHERE id = 1');
    return row ? Number(row.seq) : 0;
  }

  async healthEventsAfter(seq: number, limit: number): Promise<StoredHealthEvent[]> {
    return (await all(this.pool, 'SELECT * FROM node_health_events WHERE seq > $1 ORDER BY seq LIMIT $2', [seq, limit])).map(toHealthEvent);
  }

  async listOpen(): Promise<RemediationRecord[]> {
    return (await all(this.pool, "SELECT * FROM gpu_remediations WHERE stage <> 'closed' ORDER BY opened_at, id")).map(toRecord);
  }

  async list(filter: { nodeId?: string; gpuUuid?: string; limit: number }): Promise<RemediationRecord[]> {
    const where: string[] = [];
    const args: unknown[] = [];
    if (filter.nodeId !== undefined) where.push(`node_id = $${args.push(filter.nodeId)}`);
    if (filter.gpuUuid !== undefined) where.push(`gpu_uuid = $${args.push(filter.gpuUuid)}`);
    const sql = `SELECT * FROM gpu_remediations ${where.length ? `WHERE ${where.join(' AND ')}` : ''} ORDER BY opened_at DESC, id DESC LIMIT $${args.push(filter.limit)}`;
    return (await all(this.pool, sql, args)).map(toRecord);
  }

  async apply(change: RemediationChange): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      for (const r of change.records ?? []) {
        await run(
          client,
          `INSERT INTO gpu_remediations (id, node_id, gpu_uuid, gpu_index, xid, action, kind, stage, fault, detail, command_id,
             holders, trigger_seq, opened_at, updated_at, closed_at, outcome)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17)
           ON CONFLICT (id) DO UPDATE SET xid = excluded.xid, kind = excluded.kind, action = excluded.action, stage = excluded.stage,
             fault = excluded.fault, detail = excluded.detail, command_id = excluded.command_id, holders = excluded.holders,
             updated_at = excluded.updated_at, closed_at = excluded.closed_at, outcome = excluded.outcome`,
          [r.id, r.nodeId, r.gpuUuid, r.gpuIndex, r.xid, r.action, r.kind, r.stage, r.fault, r.detail, r.commandId,
            JSON.stringify(r.holders), r.triggerSeq, r.openedAt, r.updatedAt, r.closedAt, r.outcome],
        );
      }
      if (change.command) {
        const c = change.command;
        await run(
          client,
          `INSERT INTO node_commands (id, node_id, kind, args, state, created_at, sent_at, finished_at, error_code, error_message)
           VALUES ($1, $2, $3, $4, $5, $6, NULL, NULL, NULL, NULL)`,
          [c.id, c.nodeId, c.kind, JSON.stringify(c.args), c.state, c.createdAt],
        );
      }
      if (change.drainNode) await run(client, 'UPDATE nodes SET cordoned = TRUE, draining = TRUE WHERE id = $1', [change.drainNode]);
      if (change.cursor !== undefined) await run(client, 'UPDATE remediation_cursor SET seq = GREATEST(seq, $1) WHERE id = 1', [change.cursor]);
      for (const t of change.timeline ?? []) await appendEvent(client, t);
      for (const e of change.events ?? []) await insertEvent(client, e);
    });
  }
}
