// SQLite implementation of the node registry's store part. The telemetry flush is the
// hot path (every GPU of every node, once per flush interval): its statements are
// prepared once and run inside one transaction.
import { CLAIM_GPU, claimParams } from './gpu-claim.js';
import type Database from 'better-sqlite3';
import type { Pool } from '../../models/catalog.js';
import type {
  EnrollOutcome,
  EnrollmentTokenRecord,
  GpuClaimRecord,
  GpuRecord,
  HealthEventKind,
  HealthEventRecord,
  NodeCommandRecord,
  NodeCommandState,
  NodeRecord,
  NodeStatus,
  NodeStore,
  RelayedCommandRecord,
  StoredHealthEvent,
  TelemetryFlushRow,
} from '../node-store.js';

type Row = Record<string, unknown>;
type Db = Database.Database;

const orNull = <T>(value: unknown, map: (v: unknown) => T): T | null => (value === null || value === undefined ? null : map(value));
const bool = (value: unknown): boolean => Number(value) === 1;

export function toToken(row: Row): EnrollmentTokenRecord {
  return {
    id: String(row.id),
    hash: row.hash as Buffer,
    pool: orNull(row.pool, (v) => String(v) as Pool),
    createdAt: Number(row.created_at),
    expiresAt: Number(row.expires_at),
    usedAt: orNull(row.used_at, Number),
    usedByNode: orNull(row.used_by_node, String),
    revokedAt: orNull(row.revoked_at, Number),
  };
}

export function toNode(row: Row): NodeRecord {
  return {
    id: String(row.id),
    hostname: String(row.hostname),
    pool: String(row.pool) as Pool,
    status: String(row.status) as NodeStatus,
    cordoned: bool(row.cordoned),
    draining: bool(row.draining),
    hostFacts: orNull(row.host_facts, (v) => JSON.parse(String(v)) as Record<string, unknown>),
    agentVersion: String(row.agent_version),
    protocolVersion: Number(row.protocol_version),
    enrolledAt: Number(row.enrolled_at),
    connectedAt: orNull(row.connected_at, Number),
    lastSeenAt: orNull(row.last_seen_at, Number),
    forgottenAt: orNull(row.forgotten_at, Number),
  };
}

/** Above every string that starts with `prefix` in byte order: U+10FFFF is the largest code point. */
export const prefixEnd = (prefix: string): string => `${prefix}\u{10FFFF}`;

export function toGpu(row: Row): GpuRecord {
  return {
    uuid: String(row.uuid),
    nodeId: String(row.node_id),
    index: Number(row.gpu_index),
    name: String(row.name),
    memoryTotalBytes: orNull(row.memory_total_bytes, Number),
    healthy: bool(row.healthy),
    healthReason: String(row.health_reason),
    sample: orNull(row.sample, (v) => JSON.parse(String(v)) as Record<string, unknown>),
    sampledAt: orNull(row.sampled_at, Number),
  };
}

export function toHealthEvent(row: Row): StoredHealthEvent {
  return {
    seq: Number(row.seq),
    nodeId: String(row.node_id),
    gpuUuid: orNull(row.gpu_uuid, String),
    gpuIndex: orNull(row.gpu_index, Number),
    kind: String(row.kind) as HealthEventKind,
    xid: orNull(row.xid, Number),
    healthy: orNull(row.healthy, bool),
    message: String(row.message),
    at: Number(row.at),
  };
}

export function toCommand(row: Row): NodeCommandRecord {
  return {
    id: String(row.id),
    nodeId: String(row.node_id),
    kind: String(row.kind) as NodeCommandRecord['kind'],
    args: JSON.parse(String(row.args)) as NodeCommandRecord['args'],
    state: String(row.state) as NodeCommandState,
    createdAt: Number(row.created_at),
    sentAt: orNull(row.sent_at, Number),
    finishedAt: orNull(row.finished_at, Number),
    errorCode: orNull(row.error_code, String),
    errorMessage: orNull(row.error_message, String),
  };
}

/** Rows taken from agent_relay_commands, oldest first (DELETE … RETURNING keeps no order). */
export function toRelayedCommands(rows: Row[]): RelayedCommandRecord[] {
  return [...rows]
    .sort((a, b) => Number(a.seq) - Number(b.seq))
    .map((row) => ({ nodeId: String(row.node_id), command: String(row.command), createdAt: Number(row.created_at) }));
}

export class SqliteNodeStore implements NodeStore {
  private readonly insertEvent;
  private readonly touchNode;
  private readonly upsertGpu;

  constructor(private readonly db: Db) {
    this.insertEvent = db.prepare(
      `INSERT INTO node_health_events (node_id, gpu_uuid, gpu_index, kind, xid, healthy, message, at)
       VALUES (@nodeId, @gpuUuid, @gpuIndex, @kind, @xid, @healthy, @message, @at)`,
    );
    this.touchNode = db.prepare('UPDATE nodes SET last_seen_at = ? WHERE id = ?');
    this.upsertGpu = db.prepare(
      `INSERT INTO node_gpus (uuid, node_id, gpu_index, name, memory_total_bytes, healthy, health_reason, sample, sampled_at)
       VALUES (@uuid, @nodeId, @index, @name, @memoryTotalBytes, @healthy, @healthReason, @sample, @sampledAt)
       ON CONFLICT (uuid) DO UPDATE SET node_id = excluded.node_id, gpu_index = excluded.gpu_index,
         name = excluded.name, memory_total_bytes = excluded.memory_total_bytes, healthy = excluded.healthy,
         health_reason = excluded.health_reason, sample = excluded.sample, sampled_at = excluded.sampled_at`,
    );
  }

  private appendEvent(event: HealthEventRecord): StoredHealthEvent {
    const info = this.insertEvent.run({
      ...event,
      healthy: event.healthy === null ? null : event.healthy ? 1 : 0,
    });
    return { ...event, seq: Number(info.lastInsertRowid) };
  }

  async createToken(token: EnrollmentTokenRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO node_enrollment_tokens (id, hash, pool, created_at, expires_at, used_at, used_by_node, revoked_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(token.id, token.hash, token.pool, token.createdAt, token.expiresAt, token.usedAt, token.usedByNode, token.revokedAt);
  }

  async listTokens(): Promise<EnrollmentTokenRecord[]> {
    return (this.db.prepare('SELECT * FROM node_enrollment_tokens ORDER BY created_at, id').all() as Row[]).map(toToken);
  }

  async getTokenByHash(hash: Buffer): Promise<EnrollmentTokenRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM node_enrollment_tokens WHERE hash = ?').get(hash) as Row | undefined;
    return row && toToken(row);
  }

  async revokeToken(id: string, at: number): Promise<EnrollmentTokenRecord | undefined> {
    return this.db.transaction(() => {
      this.db
        .prepare('UPDATE node_enrollment_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL AND used_at IS NULL')
        .run(at, id);
      const row = this.db.prepare('SELECT * FROM node_enrollment_tokens WHERE id = ?').get(id) as Row | undefined;
      return row && toToken(row);
    }).immediate();
  }

  async enroll(tokenHash: Buffer, now: number, node: NodeRecord, secretHash: Buffer): Promise<EnrollOutcome> {
    return this.db.transaction((): EnrollOutcome => {
      const used = this.db
        .prepare(
          `UPDATE node_enrollment_tokens SET used_at = ?, used_by_node = ?
           WHERE hash = ? AND used_at IS NULL AND revoked_at IS NULL AND expires_at > ?`,
        )
        .run(now, node.id, tokenHash, now);
      if (used.changes === 0) {
        const row = this.db.prepare('SELECT * FROM node_enrollment_tokens WHERE hash = ?').get(tokenHash) as Row | undefined;
        return { enrolled: false, token: row && toToken(row) };
      }
      this.db
        .prepare(
          `INSERT INTO nodes (id, secret_hash, hostname, pool, status, cordoned, draining, host_facts, agent_version,
             protocol_version, enrolled_at, connected_at, last_seen_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          node.id,
          secretHash,
          node.hostname,
          node.pool,
          node.status,
          node.cordoned ? 1 : 0,
          node.draining ? 1 : 0,
          node.hostFacts === null ? null : JSON.stringify(node.hostFacts),
          node.agentVersion,
          node.protocolVersion,
          node.enrolledAt,
          node.connectedAt,
          node.lastSeenAt,
        );
      return { enrolled: true };
    }).immediate();
  }

  async getNode(id: string): Promise<NodeRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM nodes WHERE id = ?').get(id) as Row | undefined;
    return row && toNode(row);
  }

  async getNodeSecretHash(id: string): Promise<Buffer | undefined> {
    const row = this.db.prepare('SELECT secret_hash FROM nodes WHERE id = ?').get(id) as Row | undefined;
    return row?.secret_hash as Buffer | undefined;
  }

  async listNodes(): Promise<NodeRecord[]> {
    return (this.db.prepare('SELECT * FROM nodes ORDER BY pool, hostname, id').all() as Row[]).map(toNode);
  }

  async updateSession(
    id: string,
    patch: Pick<NodeRecord, 'hostname' | 'agentVersion' | 'protocolVersion' | 'status' | 'connectedAt' | 'lastSeenAt'>,
    event: HealthEventRecord | null,
  ): Promise<void> {
    this.db.transaction(() => {
      this.db
        .prepare(
          `UPDATE nodes SET hostname = @hostname, agent_version = @agentVersion, protocol_version = @protocolVersion,
             status = @status, connected_at = @connectedAt, last_seen_at = @lastSeenAt WHERE id = @id`,
        )
        .run({ ...patch, id });
      if (event) this.appendEvent(event);
    })();
  }

  async setStatus(id: string, status: NodeStatus, event: HealthEventRecord | null): Promise<void> {
    this.db.transaction(() => {
      this.db.prepare('UPDATE nodes SET status = ? WHERE id = ?').run(status, id);
      if (event) this.appendEvent(event);
    })();
  }

  async setFlags(id: string, flags: Partial<Pick<NodeRecord, 'cordoned' | 'draining'>>): Promise<NodeRecord | undefined> {
    this.db
      .prepare('UPDATE nodes SET cordoned = COALESCE(@cordoned, cordoned), draining = COALESCE(@draining, draining) WHERE id = @id')
      .run({
        id,
        cordoned: flags.cordoned === undefined ? null : flags.cordoned ? 1 : 0,
        draining: flags.draining === undefined ? null : flags.draining ? 1 : 0,
      });
    return this.getNode(id);
  }

  async markForgotten(id: string, at: number, event: HealthEventRecord): Promise<NodeRecord | undefined> {
    this.db.transaction(() => {
      const changed = this.db.prepare('UPDATE nodes SET forgotten_at = ?, cordoned = 1 WHERE id = ? AND forgotten_at IS NULL').run(at, id);
      if (changed.changes > 0) this.appendEvent(event);
    }).immediate();
    return this.getNode(id);
  }

  async setHostFacts(id: string, facts: Record<string, unknown>): Promise<void> {
    this.db.prepare('UPDATE nodes SET host_facts = ? WHERE id = ?').run(JSON.stringify(facts), id);
  }

  async listGpus(nodeId?: string): Promise<GpuRecord[]> {
    const rows = nodeId
      ? this.db.prepare('SELECT * FROM node_gpus WHERE node_id = ? ORDER BY gpu_index, uuid').all(nodeId)
      : this.db.prepare('SELECT * FROM node_gpus ORDER BY node_id, gpu_index, uuid').all();
    return (rows as Row[]).map(toGpu);
  }

  async findGpus(prefix: string, limit: number): Promise<GpuRecord[]> {
    const rows = this.db.prepare('SELECT * FROM node_gpus WHERE uuid >= ? AND uuid < ? ORDER BY uuid LIMIT ?').all(prefix, prefixEnd(prefix), limit);
    return (rows as Row[]).map(toGpu);
  }

  async flushTelemetry(rows: TelemetryFlushRow[]): Promise<void> {
    if (rows.length === 0) return;
    this.db.transaction(() => {
      for (const row of rows) {
        this.touchNode.run(row.lastSeenAt, row.nodeId);
        for (const gpu of row.gpus) {
          this.upsertGpu.run({
            ...gpu,
            nodeId: row.nodeId,
            healthy: gpu.healthy ? 1 : 0,
            sample: gpu.sample === null ? null : JSON.stringify(gpu.sample),
          });
        }
      }
    })();
  }

  async pruneGpus(nodeId: string, keepUuids: string[]): Promise<void> {
    this.db
      .prepare('DELETE FROM node_gpus WHERE node_id = ? AND uuid NOT IN (SELECT value FROM json_each(?))')
      .run(nodeId, JSON.stringify(keepUuids));
  }

  async recordHealthEvent(event: HealthEventRecord): Promise<StoredHealthEvent> {
    return this.db.transaction(() => {
      if (event.gpuUuid !== null && event.healthy !== null) {
        this.db
          .prepare('UPDATE node_gpus SET healthy = ?, health_reason = ? WHERE uuid = ? AND node_id = ?')
          .run(event.healthy ? 1 : 0, event.healthy ? '' : event.message, event.gpuUuid, event.nodeId);
      }
      return this.appendEvent(event);
    })();
  }

  async listHealthEvents(nodeId: string, limit: number): Promise<StoredHealthEvent[]> {
    const rows = this.db
      .prepare('SELECT * FROM node_health_events WHERE node_id = ? ORDER BY seq DESC LIMIT ?')
      .all(nodeId, limit) as Row[];
    return rows.map(toHealthEvent);
  }

  async lastXidByGpu(): Promise<Map<string, number>> {
    // SQLite takes the bare column (xid) from the row holding MAX(seq): the latest per GPU.
    const rows = this.db
      .prepare("SELECT gpu_uuid, xid, MAX(seq) AS seq FROM node_health_events WHERE kind = 'xid' AND gpu_uuid IS NOT NULL AND xid IS NOT NULL GROUP BY gpu_uuid")
      .all() as Array<{ gpu_uuid: string; xid: number }>;
    return new Map(rows.map((r) => [r.gpu_uuid, r.xid]));
  }

  async queueRelayedCommand(record: RelayedCommandRecord): Promise<void> {
    this.db.prepare('INSERT INTO agent_relay_commands (node_id, command, created_at) VALUES (?, ?, ?)').run(record.nodeId, record.command, record.createdAt);
  }

  async takeRelayedCommands(nodeIds: string[], since: number): Promise<RelayedCommandRecord[]> {
    return this.db.transaction(() => {
      this.db.prepare('DELETE FROM agent_relay_commands WHERE created_at < ?').run(since);
      if (nodeIds.length === 0) return [];
      const rows = this.db
        .prepare('DELETE FROM agent_relay_commands WHERE node_id IN (SELECT value FROM json_each(?)) RETURNING seq, node_id, command, created_at')
        .all(JSON.stringify(nodeIds)) as Row[];
      return toRelayedCommands(rows);
    })();
  }

  async createCommand(command: NodeCommandRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO node_commands (id, node_id, kind, args, state, created_at, sent_at, finished_at, error_code, error_message)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        command.id,
        command.nodeId,
        command.kind,
        JSON.stringify(command.args),
        command.state,
        command.createdAt,
        command.sentAt,
        command.finishedAt,
        command.errorCode,
        command.errorMessage,
      );
  }

  async getCommand(id: string): Promise<NodeCommandRecord | undefined> {
    const row = this.db.prepare('SELECT * FROM node_commands WHERE id = ?').get(id) as Row | undefined;
    return row && toCommand(row);
  }

  async listCommands(options: { state?: NodeCommandState; nodeId?: string; limit?: number }): Promise<NodeCommandRecord[]> {
    const rows = this.db
      .prepare(
        `SELECT * FROM node_commands WHERE (@state IS NULL OR state = @state) AND (@nodeId IS NULL OR node_id = @nodeId)
         ORDER BY created_at, id LIMIT @limit`,
      )
      .all({ state: options.state ?? null, nodeId: options.nodeId ?? null, limit: options.limit ?? 100 }) as Row[];
    return rows.map(toCommand);
  }

  async markCommandSent(id: string, at: number, event: HealthEventRecord | null): Promise<void> {
    this.db.transaction(() => {
      this.db.prepare(`UPDATE node_commands SET state = 'sent', sent_at = ? WHERE id = ? AND state = 'pending'`).run(at, id);
      if (event) this.appendEvent(event);
    })();
  }

  async finishCommand(id: string, ok: boolean, at: number, error: { code: string; message: string } | null): Promise<void> {
    this.db
      .prepare(
        `UPDATE node_commands SET state = ?, finished_at = ?, error_code = ?, error_message = ?
         WHERE id = ? AND state IN ('pending', 'sent')`,
      )
      .run(ok ? 'succeeded' : 'failed', at, error?.code ?? null, error?.message ?? null, id);
  }

  async claimGpus(nodeId: string, uuids: string[], owner: string, at: number): Promise<boolean> {
    const insert = this.db.prepare(CLAIM_GPU);
    const claimAll = this.db.transaction(() => {
      for (const uuid of uuids) {
        // Throwing rolls the whole claim back: all or nothing.
        if (insert.run(claimParams(uuid, nodeId, owner, at)).changes === 0) throw new ClaimConflict();
      }
    });
    try {
      claimAll.immediate();
      return true;
    } catch (err) {
      if (err instanceof ClaimConflict) return false;
      throw err;
    }
  }

  async releaseClaims(owner: string): Promise<number> {
    return this.db.prepare('DELETE FROM gpu_claims WHERE owner = ?').run(owner).changes;
  }

  async listClaims(): Promise<GpuClaimRecord[]> {
    const rows = this.db.prepare('SELECT * FROM gpu_claims ORDER BY node_id, gpu_uuid').all() as Row[];
    return rows.map((row) => ({
      gpuUuid: String(row.gpu_uuid),
      nodeId: String(row.node_id),
      owner: String(row.owner),
      claimedAt: Number(row.claimed_at),
    }));
  }
}

class ClaimConflict extends Error {}
