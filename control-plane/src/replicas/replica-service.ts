// Model-server replicas in the control plane: the reconcile pass (desired vs the replicas
// that exist vs the nodes, decided by reconcile.ts and applied here), what agents report
// about replicas (status, endpoint, restarts), what a reconnecting agent runs, and the
// directory the router reads. Every status change goes through the status table and a
// compare-and-set in the store; reports about one replica are applied in arrival order.
import { ALIVE_TASK_STATES } from '../instances/task-dispatch.js';
import { randomBytes } from 'node:crypto';
import { newId, type Clock } from '@svc/shared';
import type { TaskState__Output } from '@svc/proto';
import type { Catalog, CatalogModel } from '../models/catalog.js';
import type { NodeService } from '../nodes/node-service.js';
import { GpuAlreadyClaimed } from '../store/instance-store.js';
import type { NodeStore } from '../store/node-store.js';
import type { ReplicaPatch, ReplicaStore } from '../store/replica-store.js';
import type { DesiredReplica } from './desired.js';
import { modelServerSpec, replicaApiKey, type EngineOptions } from './engine-adapter.js';
import type { ReplicaDispatcher, StartReplicaOrder } from './replica-dispatch.js';
import type { LiveReplica, LiveReplicaDirectory, ReplicaDirectory } from './replica-directory.js';
import type { ReplicaRecord } from './replica-record.js';
import { countsAsRestart, nextReplicaStatus, replicaEventOf, TERMINAL_REPLICA_STATUSES, type ReplicaEvent } from './replica-status.js';
import { reconcileReplicas, type ReconcileAction, type ReplicaNode, type Shortfall } from './reconcile.js';

export interface ReplicaLogger {
  debug(obj: object, msg: string): void;
  info(obj: object, msg: string): void;
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

/** The nodes as the reconciler sees them. */
export interface ReplicaInventory {
  nodes(): Promise<ReplicaNode[]>;
}

export interface ReplicaServiceOptions extends EngineOptions {
  /** Grace between SIGTERM and SIGKILL when a replica is stopped. */
  stopGraceMs: number;
}

/** A start or stop order with no news from the agent for this long is sent again (orders are idempotent on the agent). */
export const ORDER_RESEND_MS = 10_000;

/** The registry's nodes and GPU claims, as ReplicaNode facts. */
export function replicaInventory(nodes: NodeService, store: NodeStore): ReplicaInventory {
  return {
    async nodes() {
      const [list, claims] = await Promise.all([nodes.list(), store.listClaims()]);
      const claimed = new Set(claims.map((c) => c.gpuUuid));
      return list.map(({ node, gpus }) => ({
        id: node.id,
        pool: node.pool,
        reachable: node.status === 'ready',
        cordoned: node.cordoned,
        draining: node.draining,
        gpus: gpus.map((g) => ({ uuid: g.uuid, healthy: g.healthy, claimed: claimed.has(g.uuid) })),
      }));
    },
  };
}

export class ReplicaService implements ReplicaDirectory {
  private readonly models: Map<string, CatalogModel>;
  /** Reports and decisions about one replica are applied one at a time, in order. */
  private readonly queues = new Map<string, Promise<unknown>>();
  /** When a start or stop order was last sent per replica (in memory: a restart re-sends, harmlessly). */
  private readonly orderSentAt = new Map<string, number>();
  private running: Promise<void> | null = null;
  private again = false;
  private lastShortfalls = '';

  constructor(
    private readonly store: ReplicaStore,
    catalog: Catalog,
    readonly desired: readonly DesiredReplica[],
    private readonly inventory: ReplicaInventory,
    private readonly dispatcher: ReplicaDispatcher,
    readonly directory: LiveReplicaDirectory,
    private readonly clock: Clock,
    private readonly options: ReplicaServiceOptions,
    private readonly log: ReplicaLogger,
  ) {
    this.models = new Map(catalog.models.map((m) => [m.id, m]));
  }

  /** The directory's answer (so `services.replicas.ready()` works as well as `services.replicaDirectory.ready()`). */
  ready(filter?: { model?: string; quantization?: string; pool?: string }): readonly LiveReplica[] {
    return this.directory.ready(filter);
  }

  /** Fills the directory from the store (a restarted control plane routes at once; agents confirm on reconnect). */
  async load(): Promise<void> {
    for (const record of await this.store.listActive()) this.directory.update(record);
  }

  list(options: { includeEnded: boolean; limit: number }): Promise<ReplicaRecord[]> {
    return this.store.list(options);
  }

  /** One reconcile pass; a call while one runs makes one more pass after it. */
  reconcile(): Promise<void> {
    if (this.running) {
      this.again = true;
      return this.running;
    }
    this.running = (async () => {
      try {
        do {
          this.again = false;
          await this.reconcileOnce();
        } while (this.again);
      } finally {
        this.running = null;
      }
    })();
    return this.running;
  }

  private async reconcileOnce(): Promise<void> {
    const [records, nodes] = await Promise.all([this.store.listActive(), this.inventory.nodes()]);
    const targets = this.desired.map((d) => ({ ...d, gpus: this.models.get(d.model)!.serving.gpus }));
    const actual = records.map((r) => ({ ...r, keyless: replicaApiKey(r) === undefined }));
    const plan = reconcileReplicas(targets, actual, nodes);
    const touched = new Set<string>();
    for (const action of plan.actions) {
      if (action.kind !== 'start') touched.add(action.replicaId);
      await this.apply(action);
    }
    this.reportShortfalls(plan.shortfalls);
    // Orders that got no answer (the node had no session, or the order was lost) go again.
    const now = this.clock.now();
    for (const record of records) {
      if (touched.has(record.id) || (record.status !== 'scheduled' && record.status !== 'stopping')) continue;
      if (now - (this.orderSentAt.get(record.id) ?? Number.NEGATIVE_INFINITY) < ORDER_RESEND_MS) continue;
      if (record.status === 'scheduled') this.sendStart(record);
      else this.sendStop(record);
    }
  }

  private async apply(action: ReconcileAction): Promise<void> {
    switch (action.kind) {
      case 'start':
        await this.startReplica(action);
        return;
      case 'stop': {
        const stopping = await this.event(action.replicaId, 'stop', { message: action.reason });
        if (stopping) {
          this.log.info({ replica: stopping.id, model: stopping.model, node: stopping.nodeId, why: action.reason }, 'stopping replica');
          this.sendStop(stopping);
        }
        return;
      }
      case 'lose': {
        const lost = await this.event(action.replicaId, 'node_lost', { message: action.reason });
        if (lost) this.log.warn({ replica: lost.id, model: lost.model, node: lost.nodeId, why: action.reason }, 'replica lost; placing a replacement');
        return;
      }
    }
  }

  private async startReplica(action: Extract<ReconcileAction, { kind: 'start' }>): Promise<void> {
    const model = this.models.get(action.model)!;
    // The replica's own key, made when it is placed and kept in its record (the store), so
    // every re-sent start and every control plane sharing the store use the same one.
    const spec = modelServerSpec(model, action.quantization, this.options, newReplicaApiKey());
    const now = this.clock.now();
    const record: ReplicaRecord = {
      id: newId('rep'),
      model: model.id,
      quantization: action.quantization,
      pool: action.pool,
      nodeId: action.nodeId,
      gpuUuids: action.gpuUuids,
      engine: spec.engine,
      image: spec.image,
      args: spec.args,
      env: spec.env,
      containerPort: spec.containerPort,
      healthPath: spec.healthPath,
      status: 'scheduled',
      endpoint: null,
      message: '',
      restarts: 0,
      createdAt: now,
      readyAt: null,
      changedAt: now,
      endedAt: null,
    };
    try {
      await this.store.create(record);
    } catch (err) {
      // An instance took the GPUs since the pass read the claims: the next pass places again.
      if (err instanceof GpuAlreadyClaimed) return;
      throw err;
    }
    this.log.info({ replica: record.id, model: record.model, quantization: record.quantization, pool: record.pool, node: record.nodeId }, 'starting replica');
    this.sendStart(record);
  }

  /** What an agent reports about a replica task; reports about unknown replicas are left to onNodeConnected. */
  onTaskState(nodeId: string, state: TaskState__Output): Promise<void> {
    const event = replicaEventOf(state.state);
    if (!event) return Promise.resolve();
    return this.enqueue(state.task_id, async () => {
      const record = await this.store.get(state.task_id);
      if (!record || record.nodeId !== nodeId) return;
      if (TERMINAL_REPLICA_STATUSES.has(record.status) && ALIVE_TASK_STATES.has(state.state)) {
        // Ended here (lost with its node, and re-placed), yet its node runs it: its GPUs may
        // be an instance's by now, so it is killed there rather than left beside a tenant.
        this.log.warn({ replica: record.id, node: nodeId, status: record.status }, 'the node runs a replica that has ended; killing it');
        this.dispatcher.stopReplica(nodeId, { replicaId: record.id, timeoutMs: 0, force: true });
        return;
      }
      await this.applyEvent(record, event, { message: state.message, endpoint: state.endpoint });
    }).then(() => undefined);
  }

  /**
   * A node's session began; `running` is every task the agent runs (Hello). Settles what
   * may have been missed: states of the replicas it runs, starts for the ones it no longer
   * runs, stops that waited for it, and a stop for replicas nobody wants any more.
   */
  async onNodeConnected(nodeId: string, running: readonly TaskState__Output[]): Promise<void> {
    const reported = new Map(running.filter((t) => t.kind === 'REPLICA').map((t) => [t.task_id, t]));
    const active = (await this.store.listActive()).filter((r) => r.nodeId === nodeId);
    for (const record of active) {
      const state = reported.get(record.id);
      reported.delete(record.id);
      if (record.status === 'stopping') {
        if (state) this.sendStop(record);
        else await this.event(record.id, 'agent_ended', { message: 'stopped' });
      } else if (state) {
        const event = replicaEventOf(state.state);
        if (event) await this.event(record.id, event, { message: state.message, endpoint: state.endpoint });
      } else if (record.status === 'scheduled') {
        this.sendStart(record);
      } else {
        await this.event(record.id, 'agent_ended', { message: 'the agent no longer ran it after reconnecting' });
      }
    }
    for (const taskId of reported.keys()) {
      this.log.info({ replica: taskId, node: nodeId }, 'stopping a replica container nobody wants');
      this.dispatcher.stopReplica(nodeId, { replicaId: taskId, timeoutMs: 0, force: true });
    }
  }

  /** A node went silent past its deadline: its replicas are replaced at once. */
  onNodeLost(nodeId: string): Promise<void> {
    this.log.warn({ node: nodeId }, 'node unreachable; re-placing its replicas');
    return this.reconcile();
  }

  private event(id: string, event: ReplicaEvent, detail: { message?: string; endpoint?: string }): Promise<ReplicaRecord | undefined> {
    return this.enqueue(id, async () => {
      const record = await this.store.get(id);
      return record ? this.applyEvent(record, event, detail) : undefined;
    });
  }

  /** Applies one event through the status table; returns the updated record, or undefined when nothing changed. */
  private async applyEvent(record: ReplicaRecord, event: ReplicaEvent, detail: { message?: string; endpoint?: string }): Promise<ReplicaRecord | undefined> {
    const to = nextReplicaStatus(record.status, event);
    if (to === undefined) return undefined;
    const now = this.clock.now();
    const patch: ReplicaPatch = { status: to, changedAt: now };
    // An ending keeps the reason it was stopped (or lost) unless the agent says more.
    if (detail.message !== undefined && !(TERMINAL_REPLICA_STATUSES.has(to) && detail.message === '')) patch.message = detail.message;
    if (detail.endpoint) patch.endpoint = detail.endpoint;
    // Started again from nothing: the old container (and its port) is gone.
    if (to === 'scheduled') patch.endpoint = null;
    // A replica never started has nothing to restart.
    if (record.status !== 'scheduled' && countsAsRestart(record.status, event)) patch.restarts = record.restarts + 1;
    if (to === 'running' && record.readyAt === null) patch.readyAt = now;
    if (TERMINAL_REPLICA_STATUSES.has(to)) patch.endedAt = now;
    const unchanged =
      to === record.status && (patch.endpoint === undefined || patch.endpoint === record.endpoint) && (patch.message === undefined || patch.message === record.message);
    if (unchanged) return undefined;
    const updated = await this.store.update(record.id, record.status, patch);
    if (!updated) return undefined;
    this.directory.update(updated);
    // The agent answered (or the replica ended): no order waits for an answer any more.
    if (to !== 'scheduled' && to !== 'stopping') this.orderSentAt.delete(updated.id);
    if (to === 'restarting' || (event === 'agent_ended' && to === 'scheduled')) {
      this.log.warn({ replica: updated.id, model: updated.model, node: updated.nodeId, restarts: updated.restarts, why: updated.message }, 'replica restarting');
    }
    if (event === 'agent_ended' && to === 'scheduled') this.sendStart(updated);
    return updated;
  }

  private enqueue<T>(id: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const next = previous.then(work);
    const settled = next.catch((err: unknown) => this.log.error({ err, replica: id }, 'applying a replica change failed'));
    this.queues.set(id, settled);
    void settled.then(() => {
      if (this.queues.get(id) === settled) this.queues.delete(id);
    });
    return next;
  }

  private sendStart(record: ReplicaRecord): void {
    if (this.dispatcher.startReplica(record.nodeId, startOrder(record))) this.orderSentAt.set(record.id, this.clock.now());
  }

  private sendStop(record: ReplicaRecord): void {
    const sent = this.dispatcher.stopReplica(record.nodeId, { replicaId: record.id, timeoutMs: this.options.stopGraceMs, force: false });
    if (sent) this.orderSentAt.set(record.id, this.clock.now());
  }

  /** Logged when the set of unplaceable targets changes, not on every pass. */
  private reportShortfalls(shortfalls: Shortfall[]): void {
    const text = shortfalls.map((s) => `${s.model}:${s.quantization}:${s.pool} missing ${s.missing} (${s.reason})`).join('; ');
    if (text === this.lastShortfalls) return;
    this.lastShortfalls = text;
    if (text) this.log.warn({ shortfalls }, `desired replicas cannot all be placed: ${text}`);
    else this.log.info({}, 'every desired replica is placed');
  }
}

/** 256 random bits, URL-safe: a replica's API key. */
export const newReplicaApiKey = (): string => randomBytes(32).toString('base64url');

/** The agent's start order for a replica: the same for every re-send. */
export function startOrder(record: ReplicaRecord): StartReplicaOrder {
  return {
    replicaId: record.id,
    image: record.image,
    args: record.args,
    env: { ...record.env, SVC_REPLICA_ID: record.id },
    labels: { model: record.model, quantization: record.quantization, pool: record.pool },
    gpuUuids: record.gpuUuids,
    containerPort: record.containerPort,
    healthPath: record.healthPath,
  };
}
