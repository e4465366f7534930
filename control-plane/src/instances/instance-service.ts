// GPU instances: create (validate, place, claim, charge up front for reservations, send
// the task to the node), follow what the agent reports, terminate gracefully, extend
// reservations, expire them. Status changes go through the lifecycle table and are
// persisted with their `instance.lifecycle` event in one transaction.
import { ApiError, newId, type Clock } from '@svc/shared';
import { billableSeconds, onDemandChargeMicros, reservationChargeMicros, reservationRateMicros, usdToMicros, microsToUsd } from '../billing/pricing.js';
import type { Pool } from '../models/catalog.js';
import { GpuAlreadyClaimed, type InstanceStore } from '../store/instance-store.js';
import type { EventRecord } from '../store/records.js';
import { accessView, sameAccess } from './instance-access.js';
import type { ChargeRecord, InstanceAccessRecord, InstanceRecord } from './instance-record.js';
import { imageReferenceProblem, labelProblem, sshPublicKeyProblem } from './input-validation.js';
import { TERMINAL, transition, type InstanceStatus, type LifecycleEvent } from './lifecycle.js';
import { place } from './placement.js';
import { poolsOf, taskResources, type Sku, type SkuCatalog } from './sku-catalog.js';
import type { AgentTaskState, GpuInventory, StartTaskOrder, TaskDispatcher } from './task-dispatch.js';

export const INSTANCE_LIFECYCLE_EVENT = 'instance.lifecycle';
export const MAX_CREATE_HOURS = 168;
export const MAX_TOTAL_HOURS = 720;
/** Two creates racing for one GPU: the loser places again with fresh claims. */
const PLACEMENT_ATTEMPTS = 5;

export interface CreateInstanceInput {
  sku: string;
  gpus: number;
  pool?: Pool;
  duration_hours?: number;
  image?: string;
  ssh_keys?: string[];
  labels?: Record<string, string>;
}

/** What an agent's task state carries besides the state. `access` is undefined when the report had none to say. */
export interface TaskDetail {
  message?: string;
  exitCode?: number;
  progress?: number;
  access?: InstanceAccessRecord | null;
}

/** The part of a pino/fastify logger the service uses. */
export interface ServiceLogger {
  warn(obj: object, msg: string): void;
  error(obj: object, msg: string): void;
}

export interface InstanceServiceOptions {
  defaultImage: string;
  /** Grace between SIGTERM and SIGKILL on a graceful terminate (spec: 60 s). */
  terminationGraceMs: number;
}

export class InstanceService {
  /** Reports about one instance are applied one at a time, in arrival order. */
  private readonly queues = new Map<string, Promise<void>>();

  constructor(
    private readonly store: InstanceStore,
    private readonly catalog: SkuCatalog,
    private readonly inventory: GpuInventory,
    private readonly dispatcher: TaskDispatcher,
    private readonly clock: Clock,
    private readonly options: InstanceServiceOptions,
    private readonly log: ServiceLogger,
  ) {}

  skuById(id: string): Sku | undefined {
    return this.catalog.skus.find((s) => s.id === id);
  }

  async create(orgId: string, keyId: string | null, input: CreateInstanceInput): Promise<InstanceRecord> {
    const sku = this.skuById(input.sku);
    if (!sku) {
      throw new ApiError('invalid_request', `unknown sku "${input.sku}"; GET /v1/skus lists them`, { param: 'sku' });
    }
    if (!(sku.gpu_counts as number[]).includes(input.gpus)) {
      throw new ApiError('invalid_request', `sku ${sku.id} is offered with ${sku.gpu_counts.join(', ')} GPUs, not ${input.gpus}`, { param: 'gpus' });
    }
    const sold = poolsOf(this.catalog, sku);
    if (input.pool && !sold.includes(input.pool)) {
      throw new ApiError('invalid_request', `sku ${sku.id} is not sold in pool ${input.pool}; it is sold in ${sold.join(', ')}`, { param: 'pool' });
    }
    const image = input.image ?? this.options.defaultImage;
    const imageProblem = imageReferenceProblem(image);
    if (imageProblem) throw new ApiError('invalid_request', imageProblem, { param: 'image' });
    (input.ssh_keys ?? []).forEach((line, i) => {
      const problem = sshPublicKeyProblem(line);
      if (problem) throw new ApiError('invalid_request', `ssh_keys[${i}]: ${problem}`, { param: `ssh_keys[${i}]` });
    });
    const labels = input.labels ?? {};
    const badLabel = labelProblem(labels);
    if (badLabel) throw new ApiError('invalid_request', badLabel[1], { param: badLabel[0] });

    const reserved = input.duration_hours !== undefined;
    for (let attempt = 1; ; attempt++) {
      const claimed = await this.store.claimedGpuUuids();
      const nodes = (await this.inventory.nodes()).map((n) => ({ ...n, gpus: n.gpus.map((g) => ({ ...g, claimed: g.claimed || claimed.has(g.uuid) })) }));
      const placement = place(nodes, { gpuModel: sku.gpu_model, gpuCount: input.gpus, pools: input.pool ? [input.pool] : sold });
      if (!placement.ok) throw new ApiError('no_capacity', `${placement.reason}; try another pool or fewer GPUs`);

      const now = this.clock.now();
      const listPrice = sku.price_per_gpu_hour[placement.pool]!;
      const rateMicros = reserved ? reservationRateMicros(listPrice, input.duration_hours!) : usdToMicros(listPrice);
      const record: InstanceRecord = {
        id: newId('inst'),
        orgId,
        keyId,
        status: 'provisioning',
        failureReason: null,
        sku: sku.id,
        gpus: input.gpus,
        pool: placement.pool,
        mode: reserved ? 'reserved' : 'on_demand',
        durationHours: reserved ? input.duration_hours! : null,
        image,
        sshKeys: input.ssh_keys ?? [],
        labels,
        nodeId: placement.nodeId,
        gpuUuids: placement.gpuUuids,
        rateMicros,
        progress: { phase: 'scheduled', fraction: null },
        createdAt: now,
        readyAt: null,
        expiresAt: reserved ? now + input.duration_hours! * 3_600_000 : null,
        terminatedAt: null,
        pendingStop: null,
        access: null,
        updatedAt: now,
      };
      const charge = reserved
        ? this.charge(record, 'reservation', reservationChargeMicros(rateMicros, input.gpus, input.duration_hours!), `${input.duration_hours} h reservation of ${input.gpus} x ${sku.id}`)
        : null;
      try {
        await this.store.create(record, this.lifecycleEvent(record), charge);
      } catch (err) {
        if (err instanceof GpuAlreadyClaimed && attempt < PLACEMENT_ATTEMPTS) continue;
        if (err instanceof GpuAlreadyClaimed) throw new ApiError('no_capacity', 'GPUs were taken by concurrent requests; retry');
        throw err;
      }
      const sent = this.dispatcher.startTask(record.nodeId!, this.startOrder(record));
      if (!sent) return (await this.apply(record, 'fail', { failureReason: 'node lost before ready: the node disconnected during placement' })) ?? record;
      return record;
    }
  }

  async get(orgId: string, id: string): Promise<InstanceRecord> {
    const record = await this.store.get(id);
    if (!record || record.orgId !== orgId) throw new ApiError('not_found', `no instance with id ${id}`);
    return record;
  }

  async terminate(orgId: string, id: string, force: boolean): Promise<InstanceRecord> {
    const record = await this.get(orgId, id);
    if (TERMINAL.has(record.status)) return record;
    if (record.status === 'draining' && !force) return record;
    const draining = record.status === 'draining' ? record : ((await this.apply(record, 'terminate', {})) ?? (await this.get(orgId, id)));
    if (draining.status !== 'draining') return draining;
    await this.sendStop(draining, force);
    return (await this.store.get(id)) ?? draining;
  }

  async extend(orgId: string, id: string, hours: number): Promise<InstanceRecord> {
    const record = await this.get(orgId, id);
    if (record.mode !== 'reserved') {
      throw new ApiError('invalid_request', 'only reservations can be extended; on-demand instances run until terminated', { param: 'hours' });
    }
    if (TERMINAL.has(record.status) || record.status === 'draining') {
      throw new ApiError('invalid_request', `instance ${id} is ${record.status} and cannot be extended`);
    }
    const total = (record.durationHours ?? 0) + hours;
    if (total > MAX_TOTAL_HOURS) {
      throw new ApiError('invalid_request', `a reservation may total at most ${MAX_TOTAL_HOURS} h; this would make ${total} h`, { param: 'hours' });
    }
    // The reservation keeps its GPUs; the SKU has capacity for it while its node stays schedulable.
    const node = (await this.inventory.nodes()).find((n) => n.id === record.nodeId);
    const healthy = node?.schedulable && record.gpuUuids.every((u) => node.gpus.some((g) => g.uuid === u && g.healthy));
    if (!healthy) {
      throw new ApiError('no_capacity', `sku ${record.sku} has no capacity to extend in pool ${record.pool}: the instance's node is not schedulable`);
    }
    const charge = this.charge(record, 'extension', reservationChargeMicros(record.rateMicros, record.gpus, hours), `${hours} h extension of ${record.gpus} x ${record.sku}`);
    const updated = await this.store.update(id, { durationHours: total, expiresAt: record.expiresAt! + hours * 3_600_000, updatedAt: this.clock.now() }, charge);
    return updated!;
  }

  /** What an agent reports about a task it runs. Unknown tasks are ignored (the reconciler removes them). */
  onTaskState(nodeId: string, taskId: string, state: AgentTaskState, detail: TaskDetail): Promise<void> {
    const previous = this.queues.get(taskId) ?? Promise.resolve();
    const next = previous.then(() => this.applyTaskState(nodeId, taskId, state, detail));
    const settled = next.catch((err: unknown) => this.log.error({ err, instance: taskId, state }, 'applying a task state failed'));
    this.queues.set(taskId, settled);
    void settled.then(() => {
      if (this.queues.get(taskId) === settled) this.queues.delete(taskId);
    });
    return next;
  }

  private async applyTaskState(nodeId: string, taskId: string, state: AgentTaskState, detail: TaskDetail): Promise<void> {
    const record = await this.store.get(taskId);
    if (!record || record.nodeId !== nodeId || TERMINAL.has(record.status)) return;
    switch (state) {
      case 'pulling':
      case 'starting': {
        const progress = { phase: state, fraction: state === 'pulling' ? (detail.progress ?? null) : null };
        if (record.status === 'provisioning') await this.apply(record, 'start', { progress });
        else await this.store.update(taskId, { progress, updatedAt: this.clock.now() });
        return;
      }
      case 'running':
        if (record.status === 'provisioning' || record.status === 'starting') {
          await this.apply(record, 'running', { readyAt: this.clock.now(), progress: null, access: detail.access ?? null });
        } else if (detail.access !== undefined) {
          await this.refreshAccess(record, detail.access);
        }
        return;
      case 'stopping':
        return;
      case 'failed':
        if (record.status === 'provisioning' || record.status === 'starting') {
          await this.apply(record, 'fail', { failureReason: detail.message || 'the container failed to start' });
          return;
        }
        await this.apply(record, 'stopped', {});
        return;
      case 'exited':
      case 'gone':
        await this.apply(record, 'stopped', {});
    }
  }

  /**
   * A node's session began (Hello with the tasks it runs). Settles what reports may have
   * been lost while it was away: stops that waited for it are sent, instances it runs
   * become ready, ready ones it no longer runs are terminated, and containers nobody
   * wants (unknown or finished instances) are stopped.
   */
  async onNodeConnected(nodeId: string, runningTaskIds: ReadonlySet<string>, access: ReadonlyMap<string, InstanceAccessRecord | null> = new Map()): Promise<void> {
    const active = await this.store.listActiveOnNode(nodeId);
    const known = new Set(active.map((r) => r.id));
    for (const record of active) {
      if (record.pendingStop) {
        await this.sendStop(record, record.pendingStop.force);
      } else if (runningTaskIds.has(record.id)) {
        if (record.status === 'provisioning' || record.status === 'starting') {
          await this.apply(record, 'running', { readyAt: this.clock.now(), progress: null, access: access.get(record.id) ?? null });
        } else if (access.has(record.id)) {
          // A restarted agent may listen elsewhere now (another SSH port, a new Jupyter token).
          await this.refreshAccess(record, access.get(record.id)!);
        }
      } else if (record.status === 'ready' || record.status === 'draining') {
        await this.apply(record, 'stopped', {});
      } else {
        // Still provisioning or starting and not running: the agent restarted mid-start. Starts are idempotent there.
        this.dispatcher.startTask(nodeId, this.startOrder(record));
      }
    }
    for (const taskId of runningTaskIds) {
      if (!known.has(taskId) && taskId.startsWith('inst_')) this.dispatcher.stopTask(nodeId, { taskId, timeoutMs: 0, force: true });
    }
  }

  /** A node stopped answering: instances that never became ready fail, without charge. */
  async onNodeLost(nodeId: string): Promise<void> {
    for (const record of await this.store.listActiveOnNode(nodeId)) {
      if (record.status === 'provisioning' || record.status === 'starting') {
        await this.apply(record, 'fail', { failureReason: 'node lost before ready' });
      }
    }
  }

  /**
   * Delivers stops that are recorded but not yet sent: the node was unreachable, or the
   * stop was requested by another process (svcctl). Run periodically by the server.
   */
  async deliverPendingStops(): Promise<number> {
    let sent = 0;
    for (const record of await this.store.listActive()) {
      if (!record.pendingStop) continue;
      if (this.dispatcher.stopTask(record.nodeId!, this.stopOrder(record, record.pendingStop.force))) {
        await this.store.update(record.id, { pendingStop: null, updatedAt: this.clock.now() });
        sent++;
      }
    }
    return sent;
  }

  /** Reservations that reached expires_at terminate by themselves, gracefully. */
  async expireDue(): Promise<number> {
    const now = this.clock.now();
    let expired = 0;
    for (const record of await this.store.listActive()) {
      if (record.expiresAt === null || record.expiresAt > now || record.status === 'draining') continue;
      const draining = await this.apply(record, 'terminate', {});
      if (draining) {
        await this.sendStop(draining, false);
        expired++;
      }
    }
    return expired;
  }

  private async refreshAccess(record: InstanceRecord, access: InstanceAccessRecord | null): Promise<void> {
    if (!sameAccess(record.access, access)) await this.store.update(record.id, { access, updatedAt: this.clock.now() });
  }

  private startOrder(record: InstanceRecord): StartTaskOrder {
    const sku = this.skuById(record.sku);
    return {
      taskId: record.id,
      image: record.image,
      gpuUuids: record.gpuUuids,
      labels: record.labels,
      env: { SVC_INSTANCE_ID: record.id },
      sshAuthorizedKeys: record.sshKeys,
      resources: sku ? taskResources(sku, record.gpus) : null,
    };
  }

  private stopOrder(record: InstanceRecord, force: boolean) {
    return { taskId: record.id, timeoutMs: force ? 0 : this.options.terminationGraceMs, force };
  }

  /** Sends the stop now, or records it for deliverPendingStops when the node is not connected. */
  private async sendStop(record: InstanceRecord, force: boolean): Promise<void> {
    const sent = this.dispatcher.stopTask(record.nodeId!, this.stopOrder(record, force));
    const pendingStop = sent ? null : { force, at: this.clock.now() };
    if (sent !== (record.pendingStop === null)) await this.store.update(record.id, { pendingStop, updatedAt: this.clock.now() });
  }

  /** Applies one lifecycle event; returns the updated record, or undefined if it raced. */
  private async apply(record: InstanceRecord, event: LifecycleEvent, patch: Partial<InstanceRecord>): Promise<InstanceRecord | undefined> {
    const step = transition(record.status, event);
    if (!step.ok) {
      this.log.warn({ instance: record.id, event, status: record.status }, step.reason);
      return undefined;
    }
    const now = this.clock.now();
    const next: Partial<InstanceRecord> & { status: InstanceStatus; updatedAt: number } = { ...patch, status: step.to, updatedAt: now };
    let charge: ChargeRecord | null = null;
    if (step.to === 'terminated') {
      next.terminatedAt = now;
      next.pendingStop = null;
      next.progress = null;
      if (record.mode === 'on_demand') {
        const seconds = billableSeconds(record.readyAt, now);
        if (seconds > 0) charge = this.charge(record, 'on_demand', onDemandChargeMicros(microsToUsd(record.rateMicros), record.gpus, seconds), `${seconds} s on demand of ${record.gpus} x ${record.sku}`);
      }
    }
    if (step.to === 'failed') {
      next.terminatedAt = now;
      next.progress = null;
    }
    return this.store.transition(record.id, record.status, next, (updated) => this.lifecycleEvent(updated), charge);
  }

  private lifecycleEvent(record: InstanceRecord): EventRecord {
    return {
      id: newId('evt'),
      type: INSTANCE_LIFECYCLE_EVENT,
      orgId: record.orgId,
      subject: record.id,
      data: instanceView(record),
      createdAt: record.updatedAt,
    };
  }

  private charge(record: InstanceRecord, kind: ChargeRecord['kind'], amountMicros: number, description: string): ChargeRecord {
    return { id: newId('chg'), orgId: record.orgId, instanceId: record.id, kind, amountMicros, description, createdAt: this.clock.now() };
  }
}

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** The instance object of the API and of `instance.lifecycle` events. */
export function instanceView(r: InstanceRecord) {
  return {
    id: r.id,
    object: 'instance' as const,
    status: r.status,
    failure_reason: r.failureReason,
    sku: r.sku,
    gpus: r.gpus,
    pool: r.pool,
    mode: r.mode,
    duration_hours: r.durationHours,
    image: r.image,
    labels: r.labels,
    node_id: r.nodeId,
    progress: r.progress,
    // SSH and Jupyter endpoints, as the node reported them; only while ready.
    ...accessView(r),
    created_at: iso(r.createdAt),
    ready_at: iso(r.readyAt),
    expires_at: iso(r.expiresAt),
    terminated_at: iso(r.terminatedAt),
    price: {
      currency: 'usd' as const,
      per_gpu_hour: microsToUsd(r.rateMicros),
      per_hour: microsToUsd(r.rateMicros * r.gpus),
      ...(r.mode === 'reserved' ? { reservation_total: microsToUsd(reservationChargeMicros(r.rateMicros, r.gpus, r.durationHours ?? 0)) } : {}),
    },
  };
}
