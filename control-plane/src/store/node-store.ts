// The node registry's part of the store: enrollment tokens, nodes and their GPUs, the
// health-event timeline, operator commands waiting for a live agent session, and GPU
// claims. Records here are plain data; the rules live in control-plane/src/nodes.
import type { Pool } from '../models/catalog.js';

/** enrolled: has an identity, never connected. ready: in session (or within the deadline). */
export type NodeStatus = 'enrolled' | 'ready' | 'unreachable';

export interface EnrollmentTokenRecord {
  id: string;
  hash: Buffer;
  /** The pool a node enrolled with this token joins; null lets the agent say. */
  pool: Pool | null;
  createdAt: number;
  expiresAt: number;
  usedAt: number | null;
  usedByNode: string | null;
  revokedAt: number | null;
}

export interface NodeRecord {
  id: string;
  hostname: string;
  pool: Pool;
  status: NodeStatus;
  cordoned: boolean;
  draining: boolean;
  /** The agent's last HostFacts message, as received (snake_case keys). */
  hostFacts: Record<string, unknown> | null;
  agentVersion: string;
  protocolVersion: number;
  enrolledAt: number;
  connectedAt: number | null;
  lastSeenAt: number | null;
  /** When an operator settled the node as lost (`svcctl nodes forget`); absent or null: never. */
  forgottenAt?: number | null;
}

/** The latest telemetry of one GPU as the agent sent it (GpuSample, snake_case keys). */
export type GpuSampleData = Record<string, unknown>;

export interface GpuRecord {
  uuid: string;
  nodeId: string;
  index: number;
  name: string;
  memoryTotalBytes: number | null;
  healthy: boolean;
  healthReason: string;
  sample: GpuSampleData | null;
  sampledAt: number | null;
}

export type HealthEventKind =
  | 'xid'
  | 'ecc_uncorrectable'
  | 'thermal'
  | 'recovered'
  | 'other'
  | 'node_up'
  | 'node_down'
  | 'reset_requested'
  /** A step of the control plane's remediation (control-plane/src/remediation). */
  | 'remediation';

export interface HealthEventRecord {
  nodeId: string;
  gpuUuid: string | null;
  gpuIndex: number | null;
  kind: HealthEventKind;
  xid: number | null;
  /** GPU health after the event; null for node-level events. */
  healthy: boolean | null;
  message: string;
  at: number;
}

export interface StoredHealthEvent extends HealthEventRecord {
  seq: number;
}

export type NodeCommandState = 'pending' | 'sent' | 'succeeded' | 'failed';

export interface NodeCommandRecord {
  id: string;
  nodeId: string;
  /** reset_gpu_health: an operator clears sticky health; reset_gpu: remediation resets the GPU itself. */
  kind: 'reset_gpu_health' | 'reset_gpu';
  args: { gpuUuid: string };
  state: NodeCommandState;
  createdAt: number;
  sentAt: number | null;
  finishedAt: number | null;
  errorCode: string | null;
  errorMessage: string | null;
}

export interface GpuClaimRecord {
  gpuUuid: string;
  nodeId: string;
  /** What holds the GPU, e.g. an instance id. */
  owner: string;
  claimedAt: number;
}

/** One node's share of a telemetry flush. */
export interface TelemetryFlushRow {
  nodeId: string;
  lastSeenAt: number;
  gpus: Array<Omit<GpuRecord, 'nodeId'>>;
}

/** A task command waiting for the replica that holds its node's agent stream (JSON of the wire Command). */
export interface RelayedCommandRecord {
  nodeId: string;
  command: string;
  createdAt: number;
}

export type EnrollOutcome = { enrolled: true } | { enrolled: false; token: EnrollmentTokenRecord | undefined };

export interface NodeStore {
  createToken(token: EnrollmentTokenRecord): Promise<void>;
  listTokens(): Promise<EnrollmentTokenRecord[]>;
  getTokenByHash(hash: Buffer): Promise<EnrollmentTokenRecord | undefined>;
  /** Marks the token revoked; repeats and used tokens change nothing. */
  revokeToken(id: string, at: number): Promise<EnrollmentTokenRecord | undefined>;
  /**
   * Atomically uses the token with this hash (unused, unrevoked, unexpired at `now`) and
   * inserts the node. Otherwise changes nothing and returns the token as found, so the
   * caller can say why it was refused.
   */
  enroll(tokenHash: Buffer, now: number, node: NodeRecord, secretHash: Buffer): Promise<EnrollOutcome>;

  getNode(id: string): Promise<NodeRecord | undefined>;
  getNodeSecretHash(id: string): Promise<Buffer | undefined>;
  listNodes(): Promise<NodeRecord[]>;
  /** Session start: identity details, status and timestamps, with the timeline row if any. */
  updateSession(
    id: string,
    patch: Pick<NodeRecord, 'hostname' | 'agentVersion' | 'protocolVersion' | 'status' | 'connectedAt' | 'lastSeenAt'>,
    event: HealthEventRecord | null,
  ): Promise<void>;
  setStatus(id: string, status: NodeStatus, event: HealthEventRecord | null): Promise<void>;
  setFlags(id: string, flags: Partial<Pick<NodeRecord, 'cordoned' | 'draining'>>): Promise<NodeRecord | undefined>;
  setHostFacts(id: string, facts: Record<string, unknown>): Promise<void>;
  /** Marks the node forgotten at `at` and cordons it, with the timeline row; the first time counts. */
  markForgotten(id: string, at: number, event: HealthEventRecord): Promise<NodeRecord | undefined>;

  listGpus(nodeId?: string): Promise<GpuRecord[]>;
  /** GPUs whose UUID starts with `prefix` (case as given), at most `limit`, by UUID: an index range, not a scan. */
  findGpus(prefix: string, limit: number): Promise<GpuRecord[]>;
  /** One transaction: last_seen per node, the latest sample per GPU (inserting new GPUs). */
  flushTelemetry(rows: TelemetryFlushRow[]): Promise<void>;
  /** Deletes the node's GPUs that are not in `keepUuids` (the agent stopped reporting them). */
  pruneGpus(nodeId: string, keepUuids: string[]): Promise<void>;
  /** Persists a health event and, for GPU events, the GPU's new health, atomically. */
  recordHealthEvent(event: HealthEventRecord): Promise<StoredHealthEvent>;
  listHealthEvents(nodeId: string, limit: number): Promise<StoredHealthEvent[]>;
  /** The latest XID of every GPU that ever reported one, by GPU UUID. */
  lastXidByGpu(): Promise<Map<string, number>>;

  createCommand(command: NodeCommandRecord): Promise<void>;
  getCommand(id: string): Promise<NodeCommandRecord | undefined>;
  listCommands(options: { state?: NodeCommandState; nodeId?: string; limit?: number }): Promise<NodeCommandRecord[]>;
  markCommandSent(id: string, at: number, event: HealthEventRecord | null): Promise<void>;
  finishCommand(id: string, ok: boolean, at: number, error: { code: string; message: string } | null): Promise<void>;

  /**
   * Queues a command for the replica holding the node's agent stream. On PostgreSQL the
   * commit also announces it (NOTIFY), so the holder takes it at once.
   */
  queueRelayedCommand(record: RelayedCommandRecord): Promise<void>;
  /**
   * Takes (deletes and returns, oldest first) the queued commands of `nodeIds` created at
   * or after `since`; commands of any node older than `since` are deleted unsent (the
   * node's next Hello re-sends whatever still matters).
   */
  takeRelayedCommands(nodeIds: string[], since: number): Promise<RelayedCommandRecord[]>;

  /** Claims every GPU in `uuids` for `owner`, or none if any is already claimed. */
  claimGpus(nodeId: string, uuids: string[], owner: string, at: number): Promise<boolean>;
  releaseClaims(owner: string): Promise<number>;
  listClaims(): Promise<GpuClaimRecord[]>;
}
