// PostgreSQL implementation of the node registry's store part. The telemetry flush is
// the hot path (every GPU of every node, once per flush interval): it is one UPDATE
// and one multi-row upsert in one transaction, however many nodes and GPUs it carries.
import type pg from 'pg';
import type {
  EnrollOutcome,
  EnrollmentTokenRecord,
  GpuClaimRecord,
  GpuRecord,
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
import { prefixEnd, toCommand, toGpu, toHealthEvent, toNode, toRelayedCommands, toToken } from '../sqlite/node-store.js';
import { GpuAlreadyClaimed } from '../instance-store.js';
import { claimAll } from './instance-store.js';
import { all, inTransaction, one, run } from './pg-pool.js';

/**
 * Announces work for the replica holding a node's agent stream: `{"t":"cmd","n":node}`
 * when a relayed or operator command is queued for it (agents/pg-session-relay.ts
 * listens; the holders announce their sessions on the same channel).
 */
export const AGENT_RELAY_CHANNEL = 'svc_agent_relay';

const compare = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Taken by every writer of the health timeline, held to its commit (see appendEvent). */
export const HEALTH_TIMELINE_LOCK = 0x5356_4831; // "SVH1"

/**
 * Appends a health-timeline row inside the caller's transaction. The remediation reads
 * the timeline after a cursor (seq), so rows must commit in seq order, as they do on
 * SQLite: like the events outbox, writers take a transaction-scoped advisory lock before
 * taking their seq. Call it after the transaction's row locks (nodes, GPUs), before any
 * event (insertEvent), so every writer takes the locks in one order.
 */
export async function appendEvent(client: pg.ClientBase, event: HealthEventRecord): Promise<StoredHealthEvent> {
  await client.query('SELECT pg_advisory_xact_lock($1)', [HEALTH_TIMELINE_LOCK]);
  const row = await one(
    client,
    `INSERT INTO node_health_events (node_id, gpu_uuid, gpu_index, kind, xid, healthy, message, at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING seq`,
    [event.nodeId, event.gpuUuid, event.gpuIndex, event.kind, event.xid, event.healthy, event.message, event.at],
  );
  return { ...event, seq: Number(row!.seq) };
}

export class PgNodeStore implements NodeStore {
  constructor(private readonly pool: pg.Pool) {}

  async createToken(token: EnrollmentTokenRecord): Promise<void> {
    await run(
      this.pool,
      `INSERT INTO node_enrollment_tokens (id, hash, pool, created_at, expires_at, used_at, used_by_node, revoked_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [token.id, token.hash, token.pool, token.createdAt, token.expiresAt, token.usedAt, token.usedByNode, token.revokedAt],
    );
  }

  async listTokens(): Promise<EnrollmentTokenRecord[]> {
    return (await all(this.pool, 'SELECT * FROM node_enrollment_tokens ORDER BY created_at, id')).map(toToken);
  }

  async getTokenByHash(hash: Buffer): Promise<EnrollmentTokenRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM node_enrollment_tokens WHERE hash = $1', [hash]);
    return row && toToken(row);
  }

  async revokeToken(id: string, at: number): Promise<EnrollmentTokenRecord | undefined> {
    const row =
      (await one(this.pool, 'UPDATE node_enrollment_tokens SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL AND used_at IS NULL RETURNING *', [at, id])) ??
      (await one(this.pool, 'SELECT * FROM node_enrollment_tokens WHERE id = $1', [id]));
    return row && toToken(row);
  }

  async enroll(tokenHash: Buffer, now: number, node: NodeRecord, secretHash: Buffer): Promise<EnrollOutcome> {
    return inTransaction(this.pool, async (client): Promise<EnrollOutcome> => {
      // A concurrent enrollment with the same token waits for this row, then finds it used.
      const used = await run(
        client,
        `UPDATE node_enrollment_tokens SET used_at = $1, used_by_node = $2
         WHERE hash = $3 AND used_at IS NULL AND revoked_at IS NULL AND expires_at > $1`,
        [now, node.id, tokenHash],
      );
      if (used === 0) {
        const row = await one(client, 'SELECT * FROM node_enrollment_tokens WHERE hash = $1', [tokenHash]);
        return { enrolled: false, token: row && toToken(row) };
      }
      await run(
        client,
        `INSERT INTO nodes (id, secret_hash, hostname, pool, status, cordoned, draining, host_facts, agent_version,
           protocol_version, enrolled_at, connected_at, last_seen_at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`,
        [
          node.id,
          secretHash,
          node.hostname,
          node.pool,
          node.status,
          node.cordoned,
          node.draining,
          node.hostFacts === null ? null : JSON.stringify(node.hostFacts),
          node.agentVersion,
          node.protocolVersion,
          node.enrolledAt,
          node.connectedAt,
          node.lastSeenAt,
        ],
      );
      return { enrolled: true };
    });
  }

  async getNode(id: string): Promise<NodeRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM nodes WHERE id = $1', [id]);
    return row && toNode(row);
  }

  async getNodeSecretHash(id: string): Promise<Buffer | undefined> {
    return (await one(this.pool, 'SELECT secret_hash FROM nodes WHERE id = $1', [id]))?.secret_hash as Buffer | undefined;
  }

  async listNodes(): Promise<NodeRecord[]> {
    return (await all(this.pool, 'SELECT * FROM nodes ORDER BY pool, hostname, id')).map(toNode);
  }

  async updateSession(
    id: string,
    patch: Pick<NodeRecord, 'hostname' | 'agentVersion' | 'protocolVersion' | 'status' | 'connectedAt' | 'lastSeenAt'>,
    event: HealthEventRecord | null,
  ): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await run(
        client,
        `UPDATE nodes SET hostname = $2, agent_version = $3, protocol_version = $4, status = $5, connected_at = $6, last_seen_at = $7 WHERE id = $1`,
        [id, patch.hostname, patch.agentVersion, patch.protocolVersion, patch.status, patch.connectedAt, patch.lastSeenAt],
      );
      if (event) await appendEvent(client, event);
    });
  }

  async setStatus(id: string, status: NodeStatus, event: HealthEventRecord | null): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await run(client, 'UPDATE nodes SET status = $1 WHERE id = $2', [status, id]);
      if (event) await appendEvent(client, event);
    });
  }

  async setFlags(id: string, flags: Partial<Pick<NodeRecord, 'cordoned' | 'draining'>>): Promise<NodeRecord | undefined> {
    const row = await one(this.pool, 'UPDATE nodes SET cordoned = COALESCE($2, cordoned), draining = COALESCE($3, draining) WHERE id = $1 RETURNING *', [
      id,
      flags.cordoned ?? null,
      flags.draining ?? null,
    ]);
    return row && toNode(row);
  }

  async markForgotten(id: string, at: number, event: HealthEventRecord): Promise<NodeRecord | undefined> {
    await inTransaction(this.pool, async (client) => {
      const changed = await run(client, 'UPDATE nodes SET forgotten_at = $1, cordoned = TRUE WHERE id = $2 AND forgotten_at IS NULL', [at, id]);
      if (changed > 0) await appendEvent(client, event);
    });
    return this.getNode(id);
  }

  async setHostFacts(id: string, facts: Record<string, unknown>): Promise<void> {
    await run(this.pool, 'UPDATE nodes SET host_facts = $1 WHERE id = $2', [JSON.stringify(facts), id]);
  }

  async listGpus(nodeId?: string): Promise<GpuRecord[]> {
    const rows = nodeId
      ? await all(this.pool, 'SELECT * FROM node_gpus WHERE node_id = $1 ORDER BY gpu_index, uuid', [nodeId])
      : await all(this.pool, 'SELECT * FROM node_gpus ORDER BY node_id, gpu_index, uuid');
    return rows.map(toGpu);
  }

  async findGpus(prefix: string, limit: number): Promise<GpuRecord[]> {
    const rows = await all(this.pool, 'SELECT * FROM node_gpus WHERE uuid >= $1 AND uuid < $2 ORDER BY uuid LIMIT $3', [prefix, prefixEnd(prefix), limit]);
    return rows.map(toGpu);
  }

  async flushTelemetry(rows: TelemetryFlushRow[]): Promise<void> {
    if (rows.length === 0) return;
    // One statement cannot touch a row twice: the last report of a node or GPU wins, as
    // with SQLite's row-by-row writes. Sorted so concurrent flushes lock rows in one order.
    const seen = [...new Map(rows.map((r) => [r.nodeId, r.lastSeenAt])).entries()].sort(([a], [b]) => compare(a, b));
    const gpus = [...new Map(rows.flatMap((row) => row.gpus.map((gpu) => [gpu.uuid, { ...gpu, nodeId: row.nodeId }] as const))).values()].sort((a, b) =>
      compare(a.uuid, b.uuid),
    );
    await inTransaction(this.pool, async (client) => {
      await run(
        client,
        `UPDATE nodes SET last_seen_at = t.seen FROM unnest($1::text[], $2::bigint[]) AS t(id, seen) WHERE nodes.id = t.id`,
        [seen.map(([id]) => id), seen.map(([, at]) => at)],
      );
      if (gpus.length === 0) return;
      await run(
        client,
        `INSERT INTO node_gpus (uuid, node_id, gpu_index, name, memory_total_bytes, healthy, health_reason, sample, sampled_at)
         SELECT * FROM unnest($1::text[], $2::text[], $3::int[], $4::text[], $5::bigint[], $6::boolean[], $7::text[], $8::text[], $9::bigint[])
         ON CONFLICT (uuid) DO UPDATE SET node_id = excluded.node_id, gpu_index = excluded.gpu_index,
           name = excluded.name, memory_total_bytes = excluded.memory_total_bytes, healthy = excluded.healthy,
           health_reason = excluded.health_reason, sample = excluded.sample, sampled_at = excluded.sampled_at`,
        [
          gpus.map((g) => g.uuid),
          gpus.map((g) => g.nodeId),
          gpus.map((g) => g.index),
          gpus.map((g) => g.name),
          gpus.map((g) => g.memoryTotalBytes),
          gpus.map((g) => g.healthy),
          gpus.map((g) => g.healthReason),
          gpus.map((g) => (g.sample === null ? null : JSON.stringify(g.sample))),
          gpus.map((g) => g.sampledAt),
        ],
      );
    });
  }

  async pruneGpus(nodeId: string, keepUuids: string[]): Promise<void> {
    await run(this.pool, 'DELETE FROM node_gpus WHERE node_id = $1 AND uuid <> ALL($2::text[])', [nodeId, keepUuids]);
  }

  async recordHealthEvent(event: HealthEventRecord): Promise<StoredHealthEvent> {
    return inTransaction(this.pool, async (client) => {
      if (event.gpuUuid !== null && event.healthy !== null) {
        await run(client, 'UPDATE node_gpus SET healthy = $1, health_reason = $2 WHERE uuid = $3 AND node_id = $4', [
          event.healthy,
          event.healthy ? '' : event.message,
          event.gpuUuid,
          event.nodeId,
        ]);
      }
      return appendEvent(client, event);
    });
  }

  async listHealthEvents(nodeId: string, limit: number): Promise<StoredHealthEvent[]> {
    return (await all(this.pool, 'SELECT * FROM node_health_events WHERE node_id = $1 ORDER BY seq DESC LIMIT $2', [nodeId, limit])).map(toHealthEvent);
  }

  async lastXidByGpu(): Promise<Map<string, number>> {
    const rows = await all(
      this.pool,
      "SELECT DISTINCT ON (gpu_uuid) gpu_uuid, xid FROM node_health_events WHERE kind = 'xid' AND gpu_uuid IS NOT NULL AND xid IS NOT NULL ORDER BY gpu_uuid, seq DESC",
    );
    return new Map(rows.map((r) => [String(r.gpu_uuid), Number(r.xid)]));
  }

  async queueRelayedCommand(record: RelayedCommandRecord): Promise<void> {
    // One statement: the NOTIFY is sent when the row commits.
    await run(
      this.pool,
      `WITH queued AS (INSERT INTO agent_relay_commands (node_id, command, created_at) VALUES ($1, $2, $3) RETURNING node_id)
       SELECT pg_notify('${AGENT_RELAY_CHANNEL}', json_build_object('t', 'cmd', 'n', node_id)::text) FROM queued`,
      [record.nodeId, record.command, record.createdAt],
    );
  }

  async takeRelayedCommands(nodeIds: string[], since: number): Promise<RelayedCommandRecord[]> {
    return inTransaction(this.pool, async (client) => {
      await run(client, 'DELETE FROM agent_relay_commands WHERE created_at < $1', [since]);
      if (nodeIds.length === 0) return [];
      return toRelayedCommands(await all(client, 'DELETE FROM agent_relay_commands WHERE node_id = ANY($1) RETURNING seq, node_id, command, created_at', [nodeIds]));
    });
  }

  async createCommand(command: NodeCommandRecord): Promise<void> {
    await run(
      this.pool,
      // The holder of the node's stream (any replica) hears of it at once instead of at its next poll.
      `WITH created AS (INSERT INTO node_commands (id, node_id, kind, args, state, created_at, sent_at, finished_at, error_code, error_message)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING node_id)
       SELECT pg_notify('${AGENT_RELAY_CHANNEL}', json_build_object('t', 'cmd', 'n', node_id)::text) FROM created`,
      [
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
      ],
    );
  }

  async getCommand(id: string): Promise<NodeCommandRecord | undefined> {
    const row = await one(this.pool, 'SELECT * FROM node_commands WHERE id = $1', [id]);
    return row && toCommand(row);
  }

  async listCommands(options: { state?: NodeCommandState; nodeId?: string; limit?: number }): Promise<NodeCommandRecord[]> {
    const rows = await all(
      this.pool,
      `SELECT * FROM node_commands WHERE ($1::text IS NULL OR state = $1) AND ($2::text IS NULL OR node_id = $2)
       ORDER BY created_at, id LIMIT $3`,
      [options.state ?? null, options.nodeId ?? null, options.limit ?? 100],
    );
    return rows.map(toCommand);
  }

  async markCommandSent(id: string, at: number, event: HealthEventRecord | null): Promise<void> {
    await inTransaction(this.pool, async (client) => {
      await run(client, `UPDATE node_commands SET state = 'sent', sent_at = $1 WHERE id = $2 AND state = 'pending'`, [at, id]);
      if (event) await appendEvent(client, event);
    });
  }

  async finishCommand(id: string, ok: boolean, at: number, error: { code: string; message: string } | null): Promise<void> {
    await run(
      this.pool,
      `UPDATE node_commands SET state = $1, finished_at = $2, error_code = $3, error_message = $4 WHERE id = $5 AND state IN ('pending', 'sent')`,
      [ok ? 'succeeded' : 'failed', at, error?.code ?? null, error?.message ?? null, id],
    );
  }

  async claimGpus(nodeId: string, uuids: string[], owner: string, at: number): Promise<boolean> {
    try {
      // Throwing rolls the whole claim back: all or nothing.
      await inTransaction(this.pool, (client) => claimAll(client, nodeId, uuids, owner, at));
      return true;
    } catch (err) {
      if (err instanceof GpuAlreadyClaimed) return false;
      throw err;
    }
  }

  async releaseClaims(owner: string): Promise<number> {
    return run(this.pool, 'DELETE FROM gpu_claims WHERE owner = $1', [owner]);
  }

  async listClaims(): Promise<GpuClaimRecord[]> {
    const rows = await all(this.pool, 'SELECT * FROM gpu_claims ORDER BY node_id, gpu_uuid');
    return rows.map((row) => ({ gpuUuid: String(row.gpu_uuid), nodeId: String(row.node_id), owner: String(row.owner), claimedAt: Number(row.claimed_at) }));
  }
}
