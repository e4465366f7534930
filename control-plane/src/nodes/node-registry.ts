// The live half of the node registry, in the server process: what connected agents
// report. Heartbeats and telemetry only touch memory (the hot path: 10,000 agents x 8
// GPUs); a timer flushes the latest sample per GPU and last-seen per node to the store
// in one transaction every flush interval. Health events, status changes and host facts
// are rare and matter, so they are persisted at once. A sweep turns nodes silent past
// the deadline `unreachable` and records node_down; any later message brings them back.
// The deadline counts from this process's start at the earliest: after a restart every
// node gets a full deadline to reconnect (its downtime is ours, not the node's); the same
// after a stall of this process (its sweep timer firing far too late).
// Several replicas: only the replica holding a node's stream hears it, and flushes its
// last-seen to the store. Before any replica marks a node unreachable it reads the store
// (storeVerdict), so a replica that does not hold the stream never marks a node its
// holder hears; and every replica picks up, from the store, nodes that first connected
// elsewhere, so a node whose holder died is marked by whoever sweeps first.
import { performance } from 'node:perf_hooks';
import type { Clock, Logger } from '@svc/shared';
import type { GpuSample__Output, GpuTelemetry__Output, HealthEvent__Output, HostFacts__Output } from '@svc/proto';
import type {
  GpuRecord,
  HealthEventKind,
  HealthEventRecord,
  NodeRecord,
  NodeStatus,
  NodeStore,
  TelemetryFlushRow,
} from '../store/node-store.js';
import { isOverdue, nextNodeStatus, storeVerdict, wasStalled } from './node-status.js';
import type { NodeTiming } from './timing.js';

export type RegistryLogger = Pick<Logger, 'debug' | 'info' | 'warn' | 'error'>;

type LiveGpu = Omit<GpuRecord, 'nodeId'>;

interface LiveNode {
  id: string;
  status: NodeStatus;
  lastSeenAt: number;
  /** Something changed since the last flush. */
  dirty: boolean;
  /** When this process last heard the node on a session it holds; undefined: held elsewhere (or nowhere). */
  heardAt?: number;
  gpus: Map<string, LiveGpu>;
  /** The GPU set as stored, sorted and joined; a different set prunes vanished GPUs. */
  storedGpuSet: string;
}

export interface SessionFacts {
  hostname: string;
  agentVersion: string;
  protocolVersion: number;
}

const HEALTH_KINDS: Record<string, HealthEventKind> = {
  XID: 'xid',
  ECC_UNCORRECTABLE: 'ecc_uncorrectable',
  THERMAL: 'thermal',
  RECOVERED: 'recovered',
};

/** The timeline row for an agent's HealthEvent (pure). */
export function healthEventRecord(nodeId: string, event: HealthEvent__Output, at: number): HealthEventRecord {
  const kind = HEALTH_KINDS[event.kind] ?? 'other';
  const message = event.message || (kind === 'xid' ? `XID ${event.xid}` : kind.replace('_', ' '));
  return {
    nodeId,
    gpuUuid: event.gpu_uuid || null,
    gpuIndex: event.gpu_uuid ? event.gpu_index : null,
    kind,
    xid: kind === 'xid' ? event.xid : null,
    healthy: event.healthy,
    message,
    at,
  };
}

/** A GPU's stored state from one telemetry sample (pure). Absent NVML values stay absent. */
export function gpuFromSample(sample: GpuSample__Output, sampledAt: number): LiveGpu {
  const data: Record<string, unknown> = {};
  // proto-loader adds virtual `_field` keys for proto3 optionals; keep only real fields.
  for (const [key, value] of Object.entries(sample)) if (!key.startsWith('_') && value !== undefined) data[key] = value;
  return {
    uuid: sample.uuid,
    index: sample.index,
    name: sample.name,
    memoryTotalBytes: sample.memory_total_bytes ?? null,
    healthy: sample.healthy,
    healthReason: sample.healthy ? '' : sample.health_reason,
    sample: data,
    sampledAt,
  };
}

const gpuSetKey = (uuids: Iterable<string>): string => [...uuids].sort().join(',');

export class NodeRegistry {
  /** Told about each node the sweep finds silent past the deadline (instances fail those not yet ready). */
  onUnreachable: ((nodeId: string) => void) | undefined;

  private readonly live = new Map<string, LiveNode>();
  private timers: NodeJS.Timeout[] = [];
  /** When this process began listening for agents (start(), or the end of a stall); silence before it is not the nodes'. */
  private watchingSince: number | null = null;
  /** Real (monotonic) time of the last timer sweep, to notice a stall whatever the injected clock says. */
  private lastTick = 0;
  private flushing: Promise<void> | null = null;
  /** When the sweep last read every node from the store (to adopt nodes first connected elsewhere). */
  private lastStoreRead = 0;

  constructor(
    private readonly store: NodeStore,
    private readonly clock: Clock,
    readonly timing: NodeTiming,
    private readonly log: RegistryLogger,
  ) {}

  /**
   * Loads nodes the store says are ready, so that a node whose agent never comes back
   * after a control-plane restart still turns unreachable after the deadline.
   */
  async load(): Promise<void> {
    const now = this.clock.now();
    for (const node of await this.store.listNodes()) {
      if (node.status !== 'ready') continue;
      this.live.set(node.id, this.liveNode(node, node.lastSeenAt ?? now, await this.store.listGpus(node.id)));
    }
  }

  /** Starts the flush and sweep timers; the deadline of every node counts from now at the earliest. */
  start(): void {
    this.watchingSince = this.clock.now();
    const run = (what: string, fn: () => Promise<unknown>) => () => {
      fn().catch((err: unknown) => this.log.error({ err }, `node registry ${what} failed`));
    };
    this.lastTick = performance.now();
    this.timers = [
      setInterval(run('flush', () => this.flush()), this.timing.flushMs),
      setInterval(run('sweep', () => this.tick()), this.timing.sweepMs),
    ];
    for (const timer of this.timers) timer.unref();
  }

  /** Stops the timers and writes what is buffered. */
  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    await this.flush();
  }

  private liveNode(node: NodeRecord, lastSeenAt: number, gpus: GpuRecord[]): LiveNode {
    return {
      id: node.id,
      status: node.status,
      lastSeenAt,
      dirty: false,
      gpus: new Map(gpus.map(({ nodeId: _, ...gpu }) => [gpu.uuid, gpu])),
      storedGpuSet: gpuSetKey(gpus.map((g) => g.uuid)),
    };
  }

  /** A Hello with a valid identity: the node is (again) ready; node_up unless it already was. */
  async sessionStarted(node: NodeRecord, facts: SessionFacts): Promise<void> {
    const now = this.clock.now();
    const existing = this.live.get(node.id);
    // The store's word counts when it says the node was down: another replica may have
    // marked it while this one still had it as ready.
    const previous = node.status !== 'ready' ? node.status : (existing?.status ?? node.status);
    const status = nextNodeStatus(previous, 'session_started');
    const event: HealthEventRecord | null =
      previous === 'ready'
        ? null
        : {
            nodeId: node.id,
            gpuUuid: null,
            gpuIndex: null,
            kind: 'node_up',
            xid: null,
            healthy: null,
            message: previous === 'enrolled' ? `first session (agent ${facts.agentVersion || 'unknown version'})` : 'agent reconnected',
            at: now,
          };
    await this.store.updateSession(
      node.id,
      { ...facts, status, connectedAt: now, lastSeenAt: now },
      event,
    );
    const entry = existing ?? this.liveNode(node, now, await this.store.listGpus(node.id));
    entry.status = status;
    entry.lastSeenAt = now;
    entry.heardAt = now;
    this.live.set(node.id, entry);
  }

  /** When the node was last heard of, as this process knows it (fresher than the store's flushed value); undefined when not loaded. */
  lastContact(nodeId: string): number | null | undefined {
    return this.live.get(nodeId)?.lastSeenAt;
  }

  /** Any message from the node's session. Memory only, unless the node comes back. */
  seen(nodeId: string): void {
    const node = this.live.get(nodeId);
    if (!node) return;
    node.lastSeenAt = this.clock.now();
    node.heardAt = node.lastSeenAt;
    node.dirty = true;
    if (node.status === 'unreachable') {
      node.status = nextNodeStatus(node.status, 'message_received');
      this.persistStatus(node.id, node.status, 'node_up', 'heard from the node again').catch((err: unknown) =>
        this.log.error({ err, node: nodeId }, 'could not record node_up'),
      );
    }
  }

  telemetry(nodeId: string, telemetry: GpuTelemetry__Output): void {
    const node = this.live.get(nodeId);
    if (!node) return;
    const now = this.clock.now();
    const reported = new Map<string, LiveGpu>();
    for (const sample of telemetry.gpus) reported.set(sample.uuid, gpuFromSample(sample, now));
    node.gpus = reported;
    this.seen(nodeId);
  }

  /** Persisted at once; the GPU's health in memory follows so the next flush agrees. */
  async healthEvent(nodeId: string, event: HealthEvent__Output): Promise<void> {
    const record = healthEventRecord(nodeId, event, this.clock.now());
    await this.store.recordHealthEvent(record);
    const gpu = record.gpuUuid ? this.live.get(nodeId)?.gpus.get(record.gpuUuid) : undefined;
    if (gpu && record.healthy !== null) {
      gpu.healthy = record.healthy;
      gpu.healthReason = record.healthy ? '' : record.message;
    }
    this.log.info({ node: nodeId, gpu: record.gpuUuid, kind: record.kind, healthy: record.healthy }, 'GPU health event');
    this.seen(nodeId);
  }

  /**
   * Records the agent's host facts as received, with what the control plane measured of the
   * node's clock beside them (`clock_offset_ms`: the node's clock less ours, from the
   * stamps on its Hello and heartbeats; 0 within a second).
   */
  async hostFacts(nodeId: string, facts: HostFacts__Output, clockOffsetMs?: number): Promise<void> {
    await this.store.setHostFacts(nodeId, { ...facts, ...(clockOffsetMs === undefined ? {} : { clock_offset_ms: clockOffsetMs }) });
    this.seen(nodeId);
  }

  /** Records an operator's GPU health reset as sent to the node. */
  resetRequested(nodeId: string, gpuUuid: string): HealthEventRecord {
    return {
      nodeId,
      gpuUuid: gpuUuid || null,
      gpuIndex: gpuUuid ? (this.live.get(nodeId)?.gpus.get(gpuUuid)?.index ?? null) : null,
      kind: 'reset_requested',
      xid: null,
      healthy: null,
      message: gpuUuid ? 'operator reset the GPU health' : 'operator reset the health of every GPU',
      at: this.clock.now(),
    };
  }

  /** The timer's sweep, after a stall check. */
  private tick(): Promise<string[]> {
    const real = performance.now();
    const gapMs = real - this.lastTick;
    this.lastTick = real;
    if (wasStalled(gapMs, this.timing.deadlineMs)) {
      this.watchingSince = this.clock.now();
      this.log.warn({ stalled_ms: Math.round(gapMs) }, 'the control plane did not run its node sweep for a while; every node gets a full deadline from now');
    }
    return this.sweep();
  }

  /** Marks ready nodes silent past the deadline unreachable, as the store confirms; returns their ids. */
  async sweep(): Promise<string[]> {
    const now = this.clock.now();
    const overdueInMemory = [...this.live.values()].filter(
      (n) => n.status === 'ready' && isOverdue(n.lastSeenAt, now, this.timing.deadlineMs, this.watchingSince),
    );
    if (overdueInMemory.length === 0 && now - this.lastStoreRead < this.timing.deadlineMs) return [];
    this.lastStoreRead = now;
    const stored = new Map((await this.store.listNodes()).map((n) => [n.id, n]));
    // Nodes that connected to another replica after this one loaded: watched from now on.
    for (const node of stored.values()) {
      if (!this.live.has(node.id) && node.status === 'ready') this.live.set(node.id, this.liveNode(node, node.lastSeenAt ?? now, []));
    }
    await this.settleWithStore(stored, now);
    const overdue: LiveNode[] = [];
    for (const node of overdueInMemory) {
      const verdict = storeVerdict(node.lastSeenAt, stored.get(node.id), now, this.timing.deadlineMs, this.watchingSince);
      if (verdict.mark) {
        overdue.push(node);
      } else {
        node.status = verdict.status;
        if (verdict.lastSeenAt !== null) node.lastSeenAt = verdict.lastSeenAt;
      }
    }
    for (const node of overdue) {
      node.status = nextNodeStatus(node.status, 'deadline_missed');
      const silentSeconds = ((now - Math.max(node.lastSeenAt, this.watchingSince ?? node.lastSeenAt)) / 1000).toFixed(1);
      await this.persistStatus(node.id, node.status, 'node_down', `no message for ${silentSeconds} s (deadline ${this.timing.deadlineMs} ms)`);
      this.log.warn({ node: node.id, silent_s: Number(silentSeconds) }, 'node unreachable');
      this.onUnreachable?.(node.id);
    }
    return overdue.map((n) => n.id);
  }

  /**
   * Squares this process's view of each node with the store's. A node whose stream this
   * process holds and hears, yet which the store has unreachable (another replica marked
   * it while this one could not write its last-seen, a database outage past the deadline),
   * is ready again, with node_up: nobody else would ever bring it back, and the node stayed
   * unschedulable until its agent happened to reconnect. A node held elsewhere takes the
   * store's status, so that this process can mark it again should it go silent later.
   */
  private async settleWithStore(stored: ReadonlyMap<string, NodeRecord>, now: number): Promise<void> {
    for (const node of this.live.values()) {
      const record = stored.get(node.id);
      if (!record || record.forgottenAt) continue;
      const heardHere = node.heardAt !== undefined && now - node.heardAt <= this.timing.deadlineMs;
      if (heardHere && node.status === 'ready' && record.status === 'unreachable') {
        await this.persistStatus(node.id, 'ready', 'node_up', 'heard from the node throughout; its last contact could not be written for a while');
        this.log.info({ node: node.id }, 'node ready again: this replica heard it while another marked it unreachable');
      } else if (!heardHere && record.status !== node.status && record.status !== 'enrolled') {
        node.status = record.status;
        if (record.lastSeenAt !== null) node.lastSeenAt = Math.max(node.lastSeenAt, record.lastSeenAt);
      }
    }
  }

  private persistStatus(nodeId: string, status: NodeStatus, kind: HealthEventKind, message: string): Promise<void> {
    return this.store.setStatus(nodeId, status, {
      nodeId,
      gpuUuid: null,
      gpuIndex: null,
      kind,
      xid: null,
      healthy: null,
      message,
      at: this.clock.now(),
    });
  }

  /** Writes every changed node's last-seen and GPU samples in one transaction. */
  async flush(): Promise<void> {
    // One flush at a time: a slow one must not interleave with the next timer tick.
    if (this.flushing) return this.flushing;
    this.flushing = this.flushNow().finally(() => {
      this.flushing = null;
    });
    return this.flushing;
  }

  private async flushNow(): Promise<void> {
    const rows: TelemetryFlushRow[] = [];
    const pruned: LiveNode[] = [];
    for (const node of this.live.values()) {
      if (!node.dirty) continue;
      node.dirty = false;
      rows.push({ nodeId: node.id, lastSeenAt: node.lastSeenAt, gpus: [...node.gpus.values()] });
      const set = gpuSetKey(node.gpus.keys());
      if (set !== node.storedGpuSet) pruned.push(node);
    }
    await this.store.flushTelemetry(rows);
    for (const node of pruned) {
      await this.store.pruneGpus(node.id, [...node.gpus.keys()]);
      node.storedGpuSet = gpuSetKey(node.gpus.keys());
    }
  }

  /** In-memory status (fresher than the store between flushes). */
  status(nodeId: string): NodeStatus | undefined {
    return this.live.get(nodeId)?.status;
  }

  get size(): number {
    return this.live.size;
  }
}
