// GPU instances: create (validate, place, claim, charge up front for reservations, send
// the task to the node), follow what the agent reports, terminate gracefully, extend
// reservations, expire them. What happens to an instance (agent reports, a node's Hello,
// terminate, expiry, a node lost or forgotten) is decided by lifecycle.ts `decide`; this
// service only carries it out. Status changes are persisted with their
// `instance.lifecycle` event and their charge or refund in one transaction.
import { randomInt } from 'node:crypto';
import { ApiError, newId, type Clock } from '@svc/shared';
import { billedUntil } from '../billing/billing-end.js';
import { accrualBoundaries, finalSeconds, secondsRun } from '../billing/accrual.js';
import { reservationChargeMicros, reservationRateMicros, usdToMicros, microsToUsd } from '../billing/pricing.js';
import type { Pool } from '../models/catalog.js';
import { GpuAlreadyClaimed, OrgGpuQuotaExceeded, type AnswerWith, type InstanceStore } from '../store/instance-store.js';
import type { AccountAdmission } from '../store/ledger-store.js';
import type { EventRecord } from '../store/records.js';
import { REDACTED, accessView, sameAccess, type ViewerRights } from './instance-access.js';
import type { ChargeRecord, InstanceAccessRecord, InstanceRecord, TransitionCharge } from './instance-record.js';
import { imageReferenceProblem, labelProblem, sshPublicKeyProblem } from './input-validation.js';
import { ENDING_STATUSES, TERMINAL, decide, isBillable, transition, type Decision, type InstanceStatus, type LifecycleEvent, type Occurrence, type StopAction } from './lifecycle.js';
import { place } from './placement.js';
import { poolsOf, taskResources, type Sku, type SkuCatalog } from './sku-catalog.js';
import { requestStop, stopOverdue, stopTiming } from './stop-request.js';
import type { AgentTaskState, GpuInventory, StartTaskOrder, TaskDispatcher } from './task-dispatch.js';

export const INSTANCE_LIFECYCLE_EVENT = 'instance.lifecycle';
export const MAX_CREATE_HOURS = 168;
export const MAX_TOTAL_HOURS = 720;
/** Two creates racing for one GPU: the loser places again with fresh claims. */
/** Placements tried when concurrent creates took the chosen GPUs first (each retry reads the claims again). */
const PLACEMENT_ATTEMPTS = 8;
/** failure_reason of a ready instance whose node came back without its container. */
export const CONTAINER_GONE_WHILE_AWAY = 'its container was no longer running when its node reconnected';
/** How long past its grace a stop may go unconfirmed before the sweep sends it again. */
export const STOP_CONFIRM_MS = 30_000;

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
  /** When the container stopped, as the node's Docker recorded it (exited/gone); absent when unknown. */
  stoppedAt?: number | null;
}

/** What the service knows about an occurrence besides its kind, for the patch and the bill. */
interface Context {
  progress?: { phase: string; fraction: number | null };
  access?: InstanceAccessRecord | null;
  /** Why an instance fails, or why a ready one ended without being asked to (its node's message). */
  reason?: string;
  stoppedAt?: number | null;
  /** The latest moment the container is known to have run (a forgotten node's last contact). */
  lastContact?: number | null;
  /** Hello: the node's last contact before this session, when it no longer runs the container. */
  unseenSince?: number | null;
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
  /** GPUs an org's instances may hold at once (its own quota, else SVC_ORG_MAX_GPUS); absent: no quota. */
  gpuQuotaOf?: (orgId: string) => Promise<number>;
  /**
   * Whether the org may be charged this many micro-dollars up front (a reservation, an
   * extension): its prepaid balance or credit limit, checked by the store in the
   * transaction that writes the charge (store/ledger-store.ts AccountAdmission).
   */
  upFront?: (amountMicros: number) => AccountAdmission;
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

  /** `answer`: the idempotent answer, committed with the instance (see store/instance-store.ts). */
  async create(orgId: string, keyId: string | null, input: CreateInstanceInput, answer?: AnswerWith): Promise<InstanceRecord> {
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
    const gpuQuota = await this.options.gpuQuotaOf?.(orgId);
    for (let attempt = 1; ; attempt++) {
      const claimed = await this.store.claimedGpuUuids();
      const nodes = (await this.inventory.nodes()).map((n) => ({ ...n, gpus: n.gpus.map((g) => ({ ...g, claimed: g.claimed || claimed.has(g.uuid) })) }));
      // A retry lost its GPUs to a create placed at the same moment: another turn of the node's free GPUs.
      const turn = attempt === 1 ? 0 : randomInt(1 << 16);
      const placement = place(nodes, { gpuModel: sku.gpu_model, gpuCount: input.gpus, pools: input.pool ? [input.pool] : sold }, turn);
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
        expiresAt: reserved ? now + Math.round(input.duration_hours! * 3_600_000) : null,
        terminatedAt: null,
        stop: null,
        access: null,
        updatedAt: now,
      };
      const charge = reserved
        ? this.charge(record, 'reservation', reservationChargeMicros(rateMicros, input.gpus, input.duration_hours!), `${input.duration_hours} h reservation of ${input.gpus} x ${sku.id}`)
        : null;
      const upFront = charge ? this.options.upFront?.(charge.amountMicros) : undefined;
      try {
        await this.store.create(record, this.lifecycleEvent(record), charge, answer, gpuQuota, upFront);
      } catch (err) {
        if (err instanceof OrgGpuQuotaExceeded) {
          throw new ApiError(
            'quota_exceeded',
            `your organization's instances hold ${err.held} of its ${err.quota} GPUs, so ${input.gpus} more would pass its quota; terminate an instance, or ask your provider to raise the quota`,
            { param: 'gpus' },
          );
        }
        if (err instanceof GpuAlreadyClaimed && attempt < PLACEMENT_ATTEMPTS) continue;
        if (err instanceof GpuAlreadyClaimed) throw new ApiError('no_capacity', 'GPUs were taken by concurrent requests; retry');
        throw err;
      }
      const sent = this.dispatcher.startTask(record.nodeId!, this.startOrder(record));
      // No live session for the node right now (it is reconnecting): the table decides; the
      // start goes out with the node's Hello, or the instance fails at the node's deadline.
      if (!sent) return (await this.happen(record.id, null, { kind: 'undeliverable' }, {})) ?? record;
      return record;
    }
  }

  async get(orgId: string, id: string): Promise<InstanceRecord> {
    const record = await this.store.get(id);
    if (!record || record.orgId !== orgId) throw new ApiError('not_found', `no instance with id ${id}`);
    return record;
  }

  /**
   * Graceful (or forced) stop. Repeating it sends the stop again (the node may have lost
   * it); `force` escalates a graceful stop in flight.
   */
  async terminate(orgId: string, id: string, force: boolean): Promise<InstanceRecord> {
    const record = await this.get(orgId, id);
    return (await this.happen(id, null, { kind: 'terminate', force }, {})) ?? record;
  }

  async extend(orgId: string, id: string, hours: number, answer?: AnswerWith): Promise<InstanceRecord> {
    const record = await this.get(orgId, id);
    const refused = extensionRefusal(record, hours, this.clock.now());
    if (refused) throw refused;
    // The reservation keeps its GPUs; the SKU has capacity for it while its node stays schedulable.
    const node = (await this.inventory.nodes()).find((n) => n.id === record.nodeId);
    const healthy = node?.schedulable && record.gpuUuids.every((u) => node.gpus.some((g) => g.uuid === u && g.healthy));
    if (!healthy) {
      throw new ApiError('no_capacity', `sku ${record.sku} has no capacity to extend in pool ${record.pool}: the instance's node is not schedulable`);
    }
    const charge = this.charge(record, 'extension', reservationChargeMicros(record.rateMicros, record.gpus, hours), `${hours} h extension of ${record.gpus} x ${record.sku}`);
    // The checks above again, in the statement that extends: another extension, an end or
    // the expiry may have come in between (on another replica too), and a charge is only
    // written with the hours it pays for; the balance is checked in the same transaction.
    const now = this.clock.now();
    const updated = await this.store.extend(id, { hours, maxTotalHours: MAX_TOTAL_HOURS, now }, charge, answer, this.options.upFront?.(charge.amountMicros));
    if (updated) return updated;
    const current = await this.get(orgId, id);
    throw extensionRefusal(current, hours, now) ?? new ApiError('conflict', `instance ${id} changed while it was being extended; retry`);
  }

  /** What an agent reports about a task it runs. Unknown tasks are ignored (the reconciler removes them). */
  async onTaskState(nodeId: string, taskId: string, state: AgentTaskState, detail: TaskDetail): Promise<void> {
    const progress = { phase: state, fraction: state === 'pulling' ? (detail.progress ?? null) : null };
    await this.happen(taskId, nodeId, { kind: 'report', state }, {
      progress,
      ...(detail.access !== undefined ? { access: detail.access } : {}),
      ...(detail.message ? { reason: detail.message } : state === 'failed' ? { reason: 'the container failed to start' } : {}),
      stoppedAt: detail.stoppedAt ?? null,
    });
  }

  /**
   * A node's session began (Hello with the tasks it runs). Settles what may have been lost
   * while it was away, each instance as the lifecycle table decides: stops are sent again
   * (with what is left of their grace), instances it runs become ready, ready ones it no
   * longer runs are stopped to confirm (billed to when they stopped, or else to
   * `lastContact`, the node's last contact before this session), starts are re-ordered;
   * containers nobody wants (unknown or finished instances) are stopped.
   */
  async onNodeConnected(
    nodeId: string,
    runningTaskIds: ReadonlySet<string>,
    access: ReadonlyMap<string, InstanceAccessRecord | null> = new Map(),
    lastContact: number | null = null,
  ): Promise<void> {
    const active = await this.store.listActiveOnNode(nodeId);
    const known = new Set(active.map((r) => r.id));
    for (const record of active) {
      const running = runningTaskIds.has(record.id);
      await this.happen(record.id, nodeId, { kind: 'hello', running }, { ...(access.has(record.id) ? { access: access.get(record.id)! } : {}), unseenSince: running ? null : lastContact });
    }
    for (const taskId of runningTaskIds) {
      if (!known.has(taskId) && taskId.startsWith('inst_')) this.dispatcher.stopTask(nodeId, { taskId, timeoutMs: 0, force: true });
    }
  }

  /** A node stopped answering: instances that never became ready fail and are refunded. */
  async onNodeLost(nodeId: string): Promise<void> {
    for (const record of await this.store.listActiveOnNode(nodeId)) {
      await this.happen(record.id, nodeId, { kind: 'node_lost' }, { reason: 'node lost before ready' });
    }
  }

  /**
   * An operator settles a node that is gone for good (`svcctl nodes forget`): instances
   * that never became ready fail (refunded); the others end as of `lastContact`, billed up
   * to it; reservations keep their up-front charge.
   */
  async forgetNode(nodeId: string, lastContact: number | null): Promise<InstanceRecord[]> {
    const settled: InstanceRecord[] = [];
    for (const record of await this.store.listActiveOnNode(nodeId)) {
      const after = await this.happen(record.id, nodeId, { kind: 'forget' }, { reason: 'node forgotten by an operator before ready', lastContact });
      if (after) settled.push(after);
    }
    return settled;
  }

  /**
   * Sends stops that no live session has taken yet (the node was unreachable, or the stop
   * was requested by another process such as svcctl), and again those the node should have
   * carried out by now but has not confirmed. Run periodically by the server.
   */
  async deliverPendingStops(): Promise<number> {
    let sent = 0;
    const now = this.clock.now();
    for (const record of await this.store.listActive()) {
      // A draining instance without a recorded stop predates stop records: its stop counts as unsent.
      if (record.status !== 'draining' || (record.stop && !stopOverdue(record.stop, now, this.options.terminationGraceMs, STOP_CONFIRM_MS))) continue;
      if ((await this.sendStop(record, 'resend')).stop?.sentAt === now) sent++;
    }
    return sent;
  }

  /** Reservations that reached expires_at terminate by themselves, gracefully; draining ones get an overdue stop again. */
  async expireDue(): Promise<number> {
    const now = this.clock.now();
    let expired = 0;
    for (const record of await this.store.listActive()) {
      if (record.expiresAt === null || record.expiresAt > now) continue;
      if (record.status === 'draining' && record.stop && !stopOverdue(record.stop, now, this.options.terminationGraceMs, STOP_CONFIRM_MS)) continue;
      const after = await this.happen(record.id, null, { kind: 'expire' }, { reason: 'the reservation ended before the instance was ready (refunded)' });
      if (record.status !== 'draining' && after?.status === 'draining') expired++;
    }
    return expired;
  }

  /**
   * Bills running on-demand instances (ready or draining) for their time so far, in the
   * period it ran (billing/accrual.ts): up to the start of the current month (closing the
   * month that ended; month end runs this before finalizing invoices) and then up to the
   * start of the current hour, each line dated 1 ms before its boundary. Safe to repeat
   * and to run on two replicas: the store moves each instance's billed mark once per
   * boundary. Run on the leader by the billing tick (app.ts). Returns the lines written.
   */
  async accrueOnDemand(): Promise<number> {
    let written = 0;
    const boundaries = accrualBoundaries(this.clock.now());
    for (const record of await this.store.listActive()) {
      if (record.mode !== 'on_demand' || !isBillable(record.status) || record.readyAt === null) continue;
      for (const until of boundaries) {
        if (until <= record.readyAt) continue;
        if (await this.store.accrueOnDemand(record.id, secondsRun(record.readyAt, until), { id: newId('chg'), createdAt: until - 1 })) written++;
      }
    }
    return written;
  }

  /**
   * Carries out what the lifecycle table decides for `happened`, one occurrence per
   * instance at a time, in arrival order. `nodeId`: the reporting node; reports about an
   * unknown instance, or one on another node, are ignored (the reconciler removes unknown
   * containers). Returns the instance as it is afterwards, undefined when unknown.
   */
  private happen(id: string, nodeId: string | null, happened: Occurrence, context: Context): Promise<InstanceRecord | undefined> {
    const previous = this.queues.get(id) ?? Promise.resolve();
    const next = previous.then(() => this.carryOut(id, nodeId, happened, context));
    const settled = next.then(
      () => undefined,
      (err: unknown) => this.log.error({ err, instance: id, happened }, 'carrying out a lifecycle decision failed'),
    );
    this.queues.set(id, settled);
    void settled.then(() => {
      if (this.queues.get(id) === settled) this.queues.delete(id);
    });
    return next;
  }

  private async carryOut(id: string, nodeId: string | null, happened: Occurrence, context: Context): Promise<InstanceRecord | undefined> {
    let record = await this.store.get(id);
    if (!record || (nodeId !== null && record.nodeId !== nodeId)) return record;
    const now = this.clock.now();
    // An expiry found due before an extension committed: the reservation runs on. The
    // transition checks it again, against an extension committing in between.
    const expiredBy = happened.kind === 'expire' ? now : undefined;
    if (expiredBy !== undefined && (record.expiresAt === null || record.expiresAt > expiredBy)) return record;
    const decision = decide(record.status, happened);
    if (decision.event) {
      const applied = await this.apply(record, decision.event, this.eventPatch(record, decision, happened, context, now), context, expiredBy);
      record = applied ?? (await this.store.get(id)) ?? record;
    } else if (decision.progress && context.progress) {
      record = (await this.store.update(id, { progress: context.progress, updatedAt: now })) ?? record;
    }
    if (decision.access && !decision.event && context.access !== undefined) {
      if (!sameAccess(record.access, context.access)) record = (await this.store.update(id, { access: context.access, updatedAt: now })) ?? record;
    }
    if (decision.stop && record.status === 'draining') record = await this.sendStop(record, decision.stop, context.unseenSince ?? null);
    if (decision.restart) this.dispatcher.startTask(record.nodeId!, this.startOrder(record));
    if (decision.kill && record.nodeId) {
      this.log.warn({ instance: id, node: record.nodeId, status: record.status }, 'the node runs the container of an instance that has ended; killing it');
      this.dispatcher.stopTask(record.nodeId, { taskId: id, timeoutMs: 0, force: true });
    }
    return record;
  }

  /** The fields an event changes besides the status (billing and events are added by apply). */
  private eventPatch(record: InstanceRecord, decision: Decision, happened: Occurrence, context: Context, now: number): Partial<InstanceRecord> {
    switch (decision.event) {
      case 'start':
        return context.progress ? { progress: context.progress } : {};
      case 'running':
        return { readyAt: now, progress: null, access: context.access ?? null };
      case 'fail':
        return { failureReason: context.reason ?? 'the instance could not be started' };
      case 'stopped':
        // Ended while nobody asked it to stop (its process exited, its node stopped it over
        // its disk limit): the node's words are the only answer its owner gets to "why".
        return record.status === 'ready' && context.reason ? { failureReason: context.reason } : {};
      case 'terminate':
        // The stop is recorded with the status change, so a crash before it is sent loses nothing.
        // A Hello that no longer lists the container ends it without anyone asking: its
        // reason says so (kept with the transition, the SLA counts that end as the provider's).
        return {
          stop: requestStop(record.stop, decision.stop ?? 'graceful', now, context.unseenSince ?? null),
          ...(happened.kind === 'hello' ? { failureReason: CONTAINER_GONE_WHILE_AWAY } : {}),
        };
      default:
        return {};
    }
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

  /**
   * Records the stop `action` asks for and hands it to the node's live session, with what
   * is left of its grace; without a session it waits for the next Hello or sweep.
   */
  private async sendStop(record: InstanceRecord, action: StopAction, unseenSince: number | null = null): Promise<InstanceRecord> {
    const now = this.clock.now();
    const request = requestStop(record.stop, action, now, unseenSince);
    const sent = this.dispatcher.stopTask(record.nodeId!, { taskId: record.id, ...stopTiming(request, now, this.options.terminationGraceMs) });
    // Unsent and unchanged (the sweep, while the node is away): nothing to write.
    if (!sent && request === record.stop) return record;
    const stop = sent ? { ...request, sentAt: now } : request;
    return (await this.store.update(record.id, { stop, updatedAt: now })) ?? record;
  }

  /**
   * Applies one lifecycle event with what it costs: `terminated` bills on-demand time up to
   * when the container stopped (billing/billing-end.ts), less what hourly and month-end
   * accruals billed already; `failed` refunds everything charged for the instance. Returns the updated record, or undefined if it raced.
   */
  private async apply(record: InstanceRecord, event: LifecycleEvent, patch: Partial<InstanceRecord>, context: Context = {}, expiredBy?: number): Promise<InstanceRecord | undefined> {
    const step = transition(record.status, event);
    if (!step.ok) {
      this.log.warn({ instance: record.id, event, status: record.status }, step.reason);
      return undefined;
    }
    const now = this.clock.now();
    const next: Partial<InstanceRecord> & { status: InstanceStatus; updatedAt: number } = { ...patch, status: step.to, updatedAt: now };
    let charge: TransitionCharge | null = null;
    if (step.to === 'terminated') {
      next.terminatedAt = now;
      next.stop = null;
      next.progress = null;
      const end = billedUntil(record.readyAt, context.stoppedAt ?? null, context.lastContact ?? record.stop?.unseenSince ?? null, now);
      if (record.mode === 'on_demand' && end !== null) {
        // The whole run (60 s minimum); the store bills what accruals have not billed yet.
        charge = { onDemandSeconds: finalSeconds(record.readyAt!, end), id: newId('chg'), orgId: record.orgId, instanceId: record.id, createdAt: now };
      }
    }
    if (step.to === 'failed') {
      next.terminatedAt = now;
      next.stop = null;
      next.progress = null;
      // Failed provisions are not charged (spec section 8): a reservation's up-front charge comes back.
      charge = { refund: true, id: newId('chg'), orgId: record.orgId, instanceId: record.id, description: `refund: instance ${record.id} failed before it was ready`, createdAt: now };
    }
    return this.store.transition(record.id, record.status, next, (updated) => this.lifecycleEvent(updated), charge, expiredBy);
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

/** Why reservation `record` may not be extended by `hours` at `now`, or null when it may. */
function extensionRefusal(record: InstanceRecord, hours: number, now: number): ApiError | null {
  if (record.mode !== 'reserved') {
    return new ApiError('invalid_request', 'only reservations can be extended; on-demand instances run until terminated', { param: 'hours' });
  }
  if (ENDING_STATUSES.includes(record.status)) return new ApiError('invalid_request', `instance ${record.id} is ${record.status} and cannot be extended`);
  if (record.expiresAt !== null && record.expiresAt <= now) {
    return new ApiError('invalid_request', `instance ${record.id}'s reservation ended at ${iso(record.expiresAt)} and cannot be extended`);
  }
  const total = (record.durationHours ?? 0) + hours;
  if (total > MAX_TOTAL_HOURS) {
    return new ApiError('invalid_request', `a reservation may total at most ${MAX_TOTAL_HOURS} h; this would make ${total} h`, { param: 'hours' });
  }
  return null;
}

/**
 * The instance object of the API and of `instance.lifecycle` events. The Jupyter token is
 * left out unless `viewer` may write the instance: events and webhooks never carry it.
 */
export function instanceView(r: InstanceRecord, viewer: ViewerRights = REDACTED) {
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
    ...accessView(r, viewer),
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
