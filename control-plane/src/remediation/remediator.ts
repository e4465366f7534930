// The remediation loop, in the server process. Every tick it reads the health timeline
// past its cursor and opens a remediation for each GPU fault the policy acts on, then
// moves each open remediation one step (remediation-policy.ts decides; this applies).
// Each step commits its stage, timeline rows, `instance.health` events, reset command and
// node flags in one transaction (RemediationStore.apply), so a restart resumes each
// remediation where it stood. Reset commands travel like operator commands: a node
// command row the dispatcher sends on the node's live session.
import { classifyXid, newId, recommendedActionOf, toRfc3339, XID_ACTION_TEXT, type Clock, type Logger, type XidAction } from '@svc/shared';
import type { EventRecord } from '../store/records.js';
import type { HealthEventRecord, NodeStore, StoredHealthEvent } from '../store/node-store.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { RemediationRecord, RemediationStore } from '../store/remediation-store.js';
import { INSTANCE_HEALTH } from '../webhooks/event-types.js';
import { firstStage, nextStep, onFault, type RemediationKind, type RemediationPolicy } from './remediation-policy.js';

export interface RemediatorDeps {
  nodes: NodeStore;
  instances: InstanceStore;
  remediations: RemediationStore;
  clock: Clock;
  policy: RemediationPolicy;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
}

/** Timeline rows read per tick; a backlog is worked through tick by tick. */
const BATCH = 500;
const BATCHES_PER_TICK = 20;

const KIND_TEXT: Record<Exclude<RemediationKind, 'timeline'>, string> = {
  reset_gpu: 'GPU drained from placement; it is reset once no workload holds it',
  reboot_node: 'node cordoned and drained; reboot it, then uncordon it',
  drain_gpu: 'GPU drained from placement until an operator clears its health',
};

/** The fault a timeline row reports, as the policy sees it; undefined when it is not a GPU fault. */
export function faultOf(event: StoredHealthEvent): { xid: number | null; action: XidAction; text: string } | undefined {
  if (event.gpuUuid === null) return undefined;
  if (event.kind === 'xid' && event.xid !== null) {
    const action = recommendedActionOf(event.xid, event.message);
    return { xid: event.xid, action, text: `XID ${event.xid}: ${classifyXid(event.xid, event.message).meaning}` };
  }
  // Uncorrectable ECC without an XID (counter growth, NVML's double-bit event): as XID 48.
  if (event.kind === 'ecc_uncorrectable' && event.healthy === false) return { xid: null, action: 'RESET_GPU', text: `uncorrectable ECC error (${event.message})` };
  return undefined;
}

export class Remediator {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;

  constructor(private readonly deps: RemediatorDeps) {}

  start(everyMs: number): void {
    this.timer = setInterval(() => {
      this.tick().catch((err: unknown) => this.deps.log.error({ err }, 'remediation tick failed'));
    }, everyMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }

  /** One pass: new faults, then one step of every open remediation. One pass at a time. */
  tick(): Promise<void> {
    this.running ??= this.tickNow().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async tickNow(): Promise<void> {
    // A backlog (a first start on a fleet's history, a fault storm) is read batch after
    // batch, yielding between them so the API stays responsive, up to a bound per pass.
    for (let batch = 0; batch < BATCHES_PER_TICK && (await this.readTimeline()) === BATCH; batch++) await new Promise((r) => setImmediate(r));
    const open = await this.deps.remediations.listOpen();
    if (open.length === 0) return;
    // One read of the claims per pass, not per remediation: a fleet-wide fault storm
    // (hundreds of open remediations) must not turn each pass into hundreds of scans.
    const claims = await this.deps.nodes.listClaims();
    for (const record of open) await this.step(record, claims);
  }

  /** Reads one batch of the timeline past the cursor; returns how many rows it read. */
  private async readTimeline(): Promise<number> {
    const { remediations } = this.deps;
    const events = await remediations.healthEventsAfter(await remediations.cursor(), BATCH);
    if (events.length === 0) return 0;
    // The open remediations are read once per batch and kept current as this pass opens
    // more; rows the policy ignores only move the cursor, once, at the end of the batch.
    let open = await remediations.listOpen();
    let skipped: number | null = null;
    for (const event of events) {
      const fault = faultOf(event);
      const kind = fault ? this.deps.policy.kindByAction[fault.action] : 'timeline';
      const current = fault && kind !== 'timeline' ? open.find((r) => r.gpuUuid === event.gpuUuid || (r.kind === 'reboot_node' && r.nodeId === event.nodeId)) : undefined;
      if (!fault || kind === 'timeline' || onFault(current, kind) === 'already') {
        skipped = event.seq;
        continue;
      }
      const record = await this.open(event, fault, kind, onFault(current, kind) === 'escalate' ? current : undefined);
      open = [...open.filter((r) => r.id !== record.id), record];
      skipped = null;
    }
    if (skipped !== null) await remediations.apply({ cursor: skipped });
    return events.length;
  }

  /** Opens (or escalates `previous` into) a remediation, drains, and notifies the affected orgs. */
  private async open(
    event: StoredHealthEvent,
    fault: { xid: number | null; action: XidAction; text: string },
    kind: Exclude<RemediationKind, 'timeline'>,
    previous: RemediationRecord | undefined,
  ): Promise<RemediationRecord> {
    const now = this.deps.clock.now();
    const stage = firstStage(kind, this.deps.policy);
    const detail = `${fault.text} -> ${XID_ACTION_TEXT[fault.action]} (${fault.action}); ${KIND_TEXT[kind]}`;
    const record: RemediationRecord = {
      id: previous?.id ?? newId('rem'),
      nodeId: event.nodeId,
      gpuUuid: event.gpuUuid,
      gpuIndex: event.gpuIndex,
      xid: fault.xid,
      action: fault.action,
      kind,
      stage,
      fault: fault.text,
      detail,
      commandId: previous?.commandId ?? null,
      holders: previous?.holders ?? [],
      triggerSeq: previous?.triggerSeq ?? event.seq,
      openedAt: previous?.openedAt ?? now,
      updatedAt: now,
      closedAt: null,
      outcome: null,
    };
    // Who is affected: instances on the GPU; for a node reboot, every instance on the node.
    const active = await this.deps.instances.listActiveOnNode(event.nodeId);
    const affected = kind === 'reboot_node' ? active : active.filter((i) => event.gpuUuid !== null && i.gpuUuids.includes(event.gpuUuid));
    const events: EventRecord[] = affected.map((instance) => ({
      id: newId('evt'),
      type: INSTANCE_HEALTH,
      orgId: instance.orgId,
      subject: instance.id,
      createdAt: now,
      data: {
        instance_id: instance.id,
        node_id: event.nodeId,
        gpu_uuid: event.gpuUuid,
        gpu_index: event.gpuIndex,
        xid: fault.xid,
        meaning: fault.text,
        recommended_action: fault.action,
        remediation: kind,
        detail: KIND_TEXT[kind],
        at: toRfc3339(now),
      },
    }));
    const orgs = new Set(affected.map((i) => i.orgId)).size;
    const notified = affected.length === 0 ? 'no instance affected' : `notified ${orgs} org${orgs === 1 ? '' : 's'} (${affected.map((i) => i.id).join(', ')})`;
    await this.deps.remediations.apply({
      cursor: event.seq,
      records: [record],
      timeline: [this.row(record, `${previous ? 'escalated: ' : ''}${detail}; ${notified}`, now)],
      events,
      ...(kind === 'reboot_node' ? { drainNode: event.nodeId } : {}),
    });
    this.deps.log.warn({ node: event.nodeId, gpu: event.gpuUuid, xid: fault.xid, kind, instances: affected.length }, 'GPU remediation opened');
    return record;
  }

  private async step(record: RemediationRecord, claims: ReadonlyArray<{ gpuUuid: string; owner: string }>): Promise<void> {
    const { nodes } = this.deps;
    const [node, gpus, command] = await Promise.all([
      nodes.getNode(record.nodeId),
      nodes.listGpus(record.nodeId),
      record.commandId ? nodes.getCommand(record.commandId) : Promise.resolve(undefined),
    ]);
    const gpu = gpus.find((g) => g.uuid === record.gpuUuid);
    const step = nextStep(record, {
      gpuHealthy: gpu?.healthy,
      holders: claims.filter((c) => c.gpuUuid === record.gpuUuid).map((c) => c.owner).sort(),
      nodeReady: node?.status === 'ready',
      nodeCordoned: node?.cordoned ?? false,
      command: command ? { state: command.state, error: command.errorMessage ?? command.errorCode } : undefined,
    });
    const now = this.deps.clock.now();
    const save = (patch: Partial<RemediationRecord>, message: string, extra: { command?: Parameters<RemediationStore['apply']>[0]['command'] } = {}) =>
      this.deps.remediations.apply({
        records: [{ ...record, ...patch, detail: message, updatedAt: now }],
        timeline: [this.row(record, message, now)],
        ...extra,
      });
    switch (step.do) {
      case 'nothing':
        return;
      case 'wait':
        return save({ holders: [...step.holders] }, `waiting for ${step.holders.join(', ')} to release the GPU before the reset`);
      case 'reset': {
        const commandId = newId('cmd');
        await save({ stage: 'resetting', commandId, holders: [] }, `no workload holds the GPU: resetting it (${commandId})`, {
          command: {
            id: commandId,
            nodeId: record.nodeId,
            kind: 'reset_gpu',
            args: { gpuUuid: record.gpuUuid ?? '' },
            state: 'pending',
            createdAt: now,
            sentAt: null,
            finishedAt: null,
            errorCode: null,
            errorMessage: null,
          },
        });
        this.deps.log.warn({ node: record.nodeId, gpu: record.gpuUuid, command: commandId }, 'resetting a GPU');
        return;
      }
      case 'hold':
        await save({ stage: 'held' }, `${step.reason}; the GPU stays drained until an operator clears its health`);
        this.deps.log.error({ node: record.nodeId, gpu: record.gpuUuid, reason: step.reason }, 'GPU remediation needs an operator');
        return;
      case 'close':
        await save({ stage: 'closed', closedAt: now, outcome: step.outcome }, `${step.reason}; ${step.outcome === 'node_returned' ? 'node back in service' : 'GPU back in service'}`);
        this.deps.log.info({ node: record.nodeId, gpu: record.gpuUuid, outcome: step.outcome }, 'GPU remediation closed');
        return;
    }
  }

  private row(record: RemediationRecord, message: string, at: number): HealthEventRecord {
    return { nodeId: record.nodeId, gpuUuid: record.gpuUuid, gpuIndex: record.gpuIndex, kind: 'remediation', xid: record.xid, healthy: null, message: `remediation: ${message}`, at };
  }
}
