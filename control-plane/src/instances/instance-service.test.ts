// The instance service over a real SQLite store. The node registry and the agent
// gateway are the service's two boundaries; here they are small in-memory stand-ins
// (the end-to-end suites use the real registry, agents and Docker).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ApiError, ManualClock } from '@svc/shared';
import { SqliteInstanceStore } from '../store/sqlite/instance-store.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import { InstanceService, STOP_CONFIRM_MS, instanceView } from './instance-service.js';
import type { CandidateNode } from './placement.js';
import { loadSkuCatalog } from './sku-catalog.js';
import type { StartTaskOrder, StopTaskOrder, TaskDispatcher } from './task-dispatch.js';

const H100 = 'NVIDIA H100 80GB HBM3';

class Nodes {
  list: CandidateNode[] = [];
  add(id: string, pool: 'na' | 'eu' | 'apac', count: number): void {
    this.list.push({ id, pool, schedulable: true, gpus: Array.from({ length: count }, (_, i) => ({ uuid: `GPU-${id}-${i}`, model: H100, healthy: true, claimed: false })) });
  }
  nodes = async (): Promise<CandidateNode[]> => this.list;
}

class Dispatcher implements TaskDispatcher {
  connected = new Set<string>();
  started: Array<[string, StartTaskOrder]> = [];
  stopped: Array<[string, StopTaskOrder]> = [];
  startTask(nodeId: string, order: StartTaskOrder): boolean {
    if (!this.connected.has(nodeId)) return false;
    this.started.push([nodeId, order]);
    return true;
  }
  stopTask(nodeId: string, order: StopTaskOrder): boolean {
    if (!this.connected.has(nodeId)) return false;
    this.stopped.push([nodeId, order]);
    return true;
  }
}

let store: SqliteStore;
let instances: SqliteInstanceStore;
let nodes: Nodes;
let dispatcher: Dispatcher;
let clock: ManualClock;
let service: InstanceService;

beforeEach(() => {
  store = openSqliteStore(mkdtempSync(join(tmpdir(), 'svc-inst-')));
  instances = store.instances as SqliteInstanceStore;
  nodes = new Nodes();
  nodes.add('node-a', 'na', 8);
  dispatcher = new Dispatcher();
  dispatcher.connected.add('node-a');
  clock = new ManualClock(Date.UTC(2026, 10, 22, 10));
  service = new InstanceService(instances, loadSkuCatalog(), nodes, dispatcher, clock, { defaultImage: 'nvidia/cuda:12.8.1-base-ubuntu24.04', terminationGraceMs: 60_000 }, pino({ level: 'silent' }));
});
afterEach(() => store.close());

const create = (input: Partial<Parameters<InstanceService['create']>[2]> = {}) => service.create('org_1', 'key_1', { sku: 'h100-80gb', gpus: 1, ...input });
const lifecycle = async (id: string) => (await store.events.list({ type: 'instance.lifecycle', limit: 100 })).filter((e) => e.subject === id).map((e) => (e.data as { status: string }).status);

async function expectApiError(promise: Promise<unknown>, type: string, param?: string): Promise<ApiError> {
  const err = await promise.then(() => undefined, (e: unknown) => e);
  expect(err).toBeInstanceOf(ApiError);
  expect((err as ApiError).type).toBe(type);
  if (param !== undefined) expect((err as ApiError).param).toBe(param);
  return err as ApiError;
}

describe('create', () => {
  it('places, claims the GPUs, records the event and sends the task to the node', async () => {
    const inst = await create({ gpus: 2, labels: { team: 'ml' } });
    expect(inst).toMatchObject({ status: 'provisioning', nodeId: 'node-a', pool: 'na', mode: 'on_demand', gpuUuids: ['GPU-node-a-0', 'GPU-node-a-1'] });
    expect(await instances.claimedGpuUuids()).toEqual(new Set(['GPU-node-a-0', 'GPU-node-a-1']));
    expect(dispatcher.started).toEqual([['node-a', expect.objectContaining({ taskId: inst.id, gpuUuids: inst.gpuUuids, labels: { team: 'ml' } })]]);
    expect(await lifecycle(inst.id)).toEqual(['provisioning']);
  });

  it('orders the container limits the SKU sells per GPU, times the GPUs', async () => {
    await create({ gpus: 2 });
    // h100-80gb: 26 vCPUs, 225 GiB, 32 GiB of /dev/shm, 500 GiB of disk and 10 Gbit/s per GPU.
    expect(dispatcher.started[0]![1].resources).toEqual({ nanoCpus: 52e9, memoryBytes: 450 * 1024 ** 3, shmBytes: 64 * 1024 ** 3, diskBytes: 1000 * 1024 ** 3, networkMbps: 20_000 });
  });

  it.each([
    [{ sku: 'nope' }, 'sku'],
    [{ gpus: 3 }, 'gpus'],
    [{ sku: 'l40s-48gb', gpus: 8 }, 'gpus'],
    [{ sku: 'l40s-48gb', pool: 'apac' as const }, 'pool'],
    [{ image: 'Not A Ref' }, 'image'],
    [{ ssh_keys: ['ssh-ed25519 AAAA'] }, 'ssh_keys[0]'],
    [{ labels: { 'bad key': 'x' } }, 'labels.bad key'],
  ])('refuses %o with param %s', async (input, param) => {
    await expectApiError(create(input), 'invalid_request', param);
  });

  it('answers no_capacity when no node has enough free GPUs, and never double-claims under concurrency', async () => {
    await create({ gpus: 4 });
    await create({ gpus: 2 });
    await expectApiError(create({ gpus: 4 }), 'no_capacity');
    const results = await Promise.allSettled([create({ gpus: 2 }), create({ gpus: 2 })]);
    expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
    expect((await instances.claimedGpuUuids()).size).toBe(8);
  });

  it('charges a reservation up front at its tier rate', async () => {
    const inst = await create({ gpus: 2, duration_hours: 48 });
    const charges = await instances.chargesFor(inst.id);
    // $2.49 x 0.7 = $1.743 per GPU-hour, 2 GPUs, 48 h.
    expect(charges.map((c) => [c.kind, c.amountMicros])).toEqual([['reservation', 167_328_000]]);
    expect(inst.expiresAt).toBe(clock.now() + 48 * 3_600_000);
  });
});

describe('lifecycle from agent reports', () => {
  it('goes provisioning -> starting (pull progress) -> ready -> draining -> terminated and bills on demand', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'pulling', { progress: 0.25 });
    expect((await service.get('org_1', inst.id)).progress).toEqual({ phase: 'pulling', fraction: 0.25 });
    await service.onTaskState('node-a', inst.id, 'pulling', { progress: 0.75 });
    await service.onTaskState('node-a', inst.id, 'running', {});
    clock.advance(90_500);
    const draining = await service.terminate('org_1', inst.id, false);
    expect(draining.status).toBe('draining');
    expect(dispatcher.stopped).toEqual([['node-a', { taskId: inst.id, timeoutMs: 60_000, force: false }]]);
    clock.advance(10_000);
    await service.onTaskState('node-a', inst.id, 'gone', {});
    const done = await service.get('org_1', inst.id);
    expect(done.status).toBe('terminated');
    expect(await lifecycle(inst.id)).toEqual(['provisioning', 'starting', 'ready', 'draining', 'terminated']);
    // Ready for 100.5 s -> 101 billable seconds at $2.49 per GPU-hour.
    expect((await instances.chargesFor(inst.id)).map((c) => c.amountMicros)).toEqual([Math.round((2_490_000 * 101) / 3600)]);
    expect((await instances.claimedGpuUuids()).size).toBe(0);
    // Repeated terminate is safe.
    expect((await service.terminate('org_1', inst.id, true)).status).toBe('terminated');
  });

  it('shows the SSH and Jupyter endpoints the node reported, from ready on and only while ready', async () => {
    const inst = await create({ ssh_keys: ['ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHDpfDFWSHS8IylBDI2oXSZVN23M9Ir3nEtApaYA88Wp me@laptop'] });
    expect(dispatcher.started[0]![1].sshAuthorizedKeys).toEqual(inst.sshKeys);
    expect(instanceView(inst)).toMatchObject({ ssh: null, jupyter: null, jupyter_unavailable_reason: null });
    const access = {
      ssh: { host: 'gpu7.example.com', port: 2222, user: inst.id, hostKey: 'ssh-ed25519 AAAA', hostKeyFingerprint: 'SHA256:abc' },
      jupyter: null,
      jupyterUnavailableReason: 'the image has no Jupyter',
    };
    await service.onTaskState('node-a', inst.id, 'running', { access });
    const ready = instanceView(await service.get('org_1', inst.id));
    expect(ready).toMatchObject({
      status: 'ready',
      ssh: { host: 'gpu7.example.com', port: 2222, user: inst.id, command: `ssh -p 2222 ${inst.id}@gpu7.example.com`, host_key_fingerprint: 'SHA256:abc' },
      jupyter: null,
      jupyter_unavailable_reason: 'the image has no Jupyter',
    });
    // The ready event carries them too, for webhook consumers.
    const events = (await store.events.list({ type: 'instance.lifecycle', limit: 100 })).filter((e) => e.subject === inst.id);
    expect((events.at(-1)!.data as { ssh: unknown }).ssh).toMatchObject({ port: 2222 });
    // A restarted agent reports where it listens now.
    await service.onNodeConnected('node-a', new Set([inst.id]), new Map([[inst.id, { ...access, ssh: { ...access.ssh, port: 2200 } }]]));
    expect(instanceView(await service.get('org_1', inst.id)).ssh?.port).toBe(2200);
    const draining = await service.terminate('org_1', inst.id, false);
    expect(instanceView(draining)).toMatchObject({ status: 'draining', ssh: null, jupyter: null });
  });

  it('bills at least 60 seconds and skips the grace with force', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    clock.advance(5_000);
    await service.terminate('org_1', inst.id, true);
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]);
    await service.onTaskState('node-a', inst.id, 'gone', {});
    expect((await instances.chargesFor(inst.id))[0]!.amountMicros).toBe(Math.round((2_490_000 * 60) / 3600));
  });

  it.each([
    ['provisioning', [] as Array<'pulling'>],
    ['pulling its image', ['pulling'] as Array<'pulling'>],
  ])('an instance terminated while %s is killed on its node, not given the grace, and ends terminated with nothing billed', async (_when, reports) => {
    const inst = await create({ gpus: 8 });
    for (const state of reports) await service.onTaskState('node-a', inst.id, state, { progress: 0.5 });
    clock.advance(1_000);
    // An ordinary (graceful) terminate: the grace was the tenant's window of unbilled GPU time.
    expect((await service.terminate('org_1', inst.id, false)).status).toBe('draining');
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]);
    // The node reconnects before it confirms: the stop sent again is still a kill.
    clock.advance(1_000);
    await service.onNodeConnected('node-a', new Set());
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]);
    await service.onTaskState('node-a', inst.id, 'gone', {});
    expect((await service.get('org_1', inst.id)).status).toBe('terminated');
    expect(await instances.chargesFor(inst.id)).toEqual([]);
    expect((await instances.claimedGpuUuids()).size).toBe(0);
  });

  it.each([
    ['its process exited', 'exited', 'exited with code 1', 'exited with code 1'],
    ['its node stopped it over its disk limit', 'gone', 'stopped by its node: the instance used 52.0 GiB of disk, over its limit of 50.0 GiB', 'stopped by its node: the instance used 52.0 GiB of disk, over its limit of 50.0 GiB'],
    ['gone without a word (an older agent)', 'gone', '', null],
  ] as const)('a ready instance that ended without being asked (%s) is terminated, saying why', async (_name, state, message, reason) => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    await service.onTaskState('node-a', inst.id, state, { message });
    expect(await service.get('org_1', inst.id)).toMatchObject({ status: 'terminated', failureReason: reason });
  });

  it('a terminated instance its owner stopped has no failure reason, whatever the node said', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    await service.terminate('org_1', inst.id, false);
    await service.onTaskState('node-a', inst.id, 'gone', { message: 'exited with code 143' });
    expect(await service.get('org_1', inst.id)).toMatchObject({ status: 'terminated', failureReason: null });
  });

  it('fails a pull error with the reason and charges nothing', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'pulling', { progress: 0 });
    await service.onTaskState('node-a', inst.id, 'failed', { message: 'pull failed: manifest unknown' });
    const failed = await service.get('org_1', inst.id);
    expect(failed).toMatchObject({ status: 'failed', failureReason: 'pull failed: manifest unknown' });
    expect(await instances.chargesFor(inst.id)).toEqual([]);
    expect((await instances.claimedGpuUuids()).size).toBe(0);
  });

  it('keeps a create whose node has no live session provisioning, starts it on the node\'s Hello', async () => {
    dispatcher.connected.delete('node-a');
    const inst = await create();
    expect(inst.status).toBe('provisioning');
    expect(dispatcher.started).toEqual([]);
    dispatcher.connected.add('node-a');
    await service.onNodeConnected('node-a', new Set());
    expect(dispatcher.started.map(([node, order]) => [node, order.taskId])).toEqual([['node-a', inst.id]]);
    expect((await service.get('org_1', inst.id)).status).toBe('provisioning');
    await service.onTaskState('node-a', inst.id, 'running', {});
    expect((await service.get('org_1', inst.id)).status).toBe('ready');
  });

  it('fails a create whose node never came back once the node is declared lost', async () => {
    dispatcher.connected.delete('node-a');
    const inst = await create();
    await service.onNodeLost('node-a');
    expect(await service.get('org_1', inst.id)).toMatchObject({ status: 'failed', failureReason: 'node lost before ready' });
    expect((await instances.claimedGpuUuids()).size).toBe(0);
  });

  it('fails instances that never became ready when their node is lost', async () => {
    const inst = await create();
    await service.onNodeLost('node-a');
    expect((await service.get('org_1', inst.id))).toMatchObject({ status: 'failed', failureReason: 'node lost before ready' });
  });

  it('records a terminate for an unreachable node and carries it out when the node returns', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    dispatcher.connected.delete('node-a');
    expect((await service.terminate('org_1', inst.id, false)).status).toBe('draining');
    expect((await service.get('org_1', inst.id)).stop).toEqual({ force: false, at: clock.now(), sentAt: null });
    dispatcher.connected.add('node-a');
    clock.advance(15_000);
    await service.onNodeConnected('node-a', new Set([inst.id]));
    // The grace runs from the request, not from the delivery.
    expect(dispatcher.stopped).toEqual([['node-a', { taskId: inst.id, timeoutMs: 45_000, force: false }]]);
  });

  it('delivers stops recorded by another process on the next sweep', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    const offline: TaskDispatcher = { startTask: () => false, stopTask: () => false };
    const cli = new InstanceService(instances, loadSkuCatalog(), nodes, offline, clock, { defaultImage: 'x', terminationGraceMs: 60_000 }, pino({ level: 'silent' }));
    expect((await cli.terminate('org_1', inst.id, true)).stop).toEqual({ force: true, at: clock.now(), sentAt: null });
    expect(await service.deliverPendingStops()).toBe(1);
    expect(dispatcher.stopped).toEqual([['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]]);
    expect(await service.deliverPendingStops()).toBe(0);
    // Unconfirmed long after it was sent: the sweep sends it again.
    clock.advance(STOP_CONFIRM_MS);
    expect(await service.deliverPendingStops()).toBe(1);
  });

  it('settles lost reports from the running set a reconnecting node announces', async () => {
    const lostRunning = await create();
    const lostGone = await create();
    await service.onTaskState('node-a', lostGone.id, 'running', {});
    await service.onNodeConnected('node-a', new Set([lostRunning.id, 'inst_stranger']));
    expect((await service.get('org_1', lostRunning.id)).status).toBe('ready');
    // Ready but no longer running: the node is asked to confirm; its answer settles the bill.
    expect((await service.get('org_1', lostGone.id)).status).toBe('draining');
    expect(dispatcher.stopped).toEqual([
      ['node-a', { taskId: lostGone.id, timeoutMs: 0, force: true }],
      ['node-a', { taskId: 'inst_stranger', timeoutMs: 0, force: true }],
    ]);
    await service.onTaskState('node-a', lostGone.id, 'gone', {});
    expect((await service.get('org_1', lostGone.id)).status).toBe('terminated');
  });

  it('orders the start again for an instance whose agent restarted mid-start', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'pulling', { progress: 0.3 });
    dispatcher.started.length = 0;
    await service.onNodeConnected('node-a', new Set());
    expect(dispatcher.started.map(([node, order]) => [node, order.taskId, order.image])).toEqual([['node-a', inst.id, inst.image]]);
    expect((await service.get('org_1', inst.id)).status).toBe('starting');
  });

  it('applies reports for one instance in arrival order even when they come at once', async () => {
    const inst = await create();
    await Promise.all([
      service.onTaskState('node-a', inst.id, 'pulling', { progress: 0.5 }),
      service.onTaskState('node-a', inst.id, 'pulling', { progress: 1 }),
      service.onTaskState('node-a', inst.id, 'running', {}),
    ]);
    expect((await service.get('org_1', inst.id)).status).toBe('ready');
    expect(await lifecycle(inst.id)).toEqual(['provisioning', 'starting', 'ready']);
  });

  it('ignores reports from a node the instance is not on', async () => {
    const inst = await create();
    await service.onTaskState('node-b', inst.id, 'running', {});
    expect((await service.get('org_1', inst.id)).status).toBe('provisioning');
    // And about instances it does not know at all.
    await expect(service.onTaskState('node-a', 'inst_unknown', 'running', {})).resolves.toBeUndefined();
  });
});

describe('reservations', () => {
  it('extends at the booked rate up to 720 h in total; refuses on-demand instances', async () => {
    const inst = await create({ duration_hours: 24 });
    const extended = await service.extend('org_1', inst.id, 24);
    expect(extended).toMatchObject({ durationHours: 48, expiresAt: inst.expiresAt! + 24 * 3_600_000 });
    expect((await instances.chargesFor(inst.id)).map((c) => c.kind)).toEqual(['reservation', 'extension']);
    expect((await instances.chargesFor(inst.id))[1]!.amountMicros).toBe(Math.round(1_743_000 * 24));
    await expectApiError(service.extend('org_1', inst.id, 700), 'invalid_request', 'hours');
    const onDemand = await create();
    await expectApiError(service.extend('org_1', onDemand.id, 1), 'invalid_request', 'hours');
  });

  it('answers no_capacity to an extension while the node is not schedulable', async () => {
    const inst = await create({ duration_hours: 24 });
    nodes.list[0]!.schedulable = false;
    await expectApiError(service.extend('org_1', inst.id, 1), 'no_capacity');
  });

  it('terminates by itself, gracefully, at expires_at', async () => {
    const inst = await create({ duration_hours: 1 });
    await service.onTaskState('node-a', inst.id, 'running', {});
    clock.advance(3_599_000);
    expect(await service.expireDue()).toBe(0);
    clock.advance(1_000);
    expect(await service.expireDue()).toBe(1);
    expect((await service.get('org_1', inst.id)).status).toBe('draining');
    expect(dispatcher.stopped).toEqual([['node-a', { taskId: inst.id, timeoutMs: 60_000, force: false }]]);
  });
});

describe('reads', () => {
  it('hides other orgs\' instances and pages newest first with a status filter', async () => {
    await expectApiError(service.get('org_2', (await create()).id), 'not_found');
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      clock.advance(1000);
      ids.push((await create()).id);
    }
    await service.onTaskState('node-a', ids[1]!, 'running', {});
    const first = await instances.list('org_1', { limit: 2 });
    expect(first.hasMore).toBe(true);
    expect(first.data.map((i) => i.id)).toEqual([ids[3], ids[2]]);
    const ready = await instances.list('org_1', { limit: 10, statuses: ['ready'] });
    expect(ready.data.map((i) => i.id)).toEqual([ids[1]]);
    const next = await instances.list('org_1', { limit: 10, after: ids[2] });
    expect(next.data.map((i) => i.id).slice(0, 2)).toEqual([ids[1], ids[0]]);
  });
});

describe('billing integrity', () => {
  const sum = async (id: string) => (await instances.chargesFor(id)).reduce((total, c) => total + c.amountMicros, 0);
  const perSecond = (seconds: number) => Math.round((2_490_000 * seconds) / 3600);

  it('refunds a failed reservation with a visible credit line: the charges net to zero', async () => {
    const inst = await create({ duration_hours: 24 });
    await service.onTaskState('node-a', inst.id, 'pulling', { progress: 0 });
    await service.onTaskState('node-a', inst.id, 'failed', { message: 'pull failed: manifest unknown' });
    const charges = await instances.chargesFor(inst.id);
    // $2.49 x 0.7 x 24 h = $41.832, charged up front and credited back.
    expect(charges.map((c) => [c.kind, c.amountMicros])).toEqual([['reservation', 41_832_000], ['refund', -41_832_000]]);
    expect(charges[1]!.description).toContain(inst.id);
    expect(await sum(inst.id)).toBe(0);
  });

  it('refunds the reservation and its extensions when the node is lost before ready', async () => {
    const inst = await create({ duration_hours: 1 });
    await service.extend('org_1', inst.id, 2);
    await service.onNodeLost('node-a');
    expect((await service.get('org_1', inst.id)).status).toBe('failed');
    expect((await instances.chargesFor(inst.id)).map((c) => c.kind)).toEqual(['reservation', 'extension', 'refund']);
    expect(await sum(inst.id)).toBe(0);
  });

  it('refunds a reservation whose start order could not be sent and whose node never came back', async () => {
    dispatcher.connected.delete('node-a');
    const inst = await create({ duration_hours: 24 });
    expect(inst.status).toBe('provisioning');
    await service.onNodeLost('node-a');
    expect((await service.get('org_1', inst.id)).status).toBe('failed');
    expect(await sum(inst.id)).toBe(0);
  });

  it('a reservation that ran cannot be turned into a refund: its container failing or exiting ends it, charged', async () => {
    const crashed = await create({ duration_hours: 24 });
    const exited = await create({ duration_hours: 24 });
    for (const inst of [crashed, exited]) await service.onTaskState('node-a', inst.id, 'running', {});
    clock.advance(3_600_000);
    await service.onTaskState('node-a', crashed.id, 'failed', { message: 'the tenant made it crash' });
    await service.onTaskState('node-a', exited.id, 'exited', { exitCode: 1 });
    for (const inst of [crashed, exited]) {
      expect((await service.get('org_1', inst.id)).status).toBe('terminated');
      expect((await instances.chargesFor(inst.id)).map((c) => c.kind)).toEqual(['reservation']);
    }
  });

  it('a failed on-demand start writes no line at all', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'failed', { message: 'no such image' });
    expect(await instances.chargesFor(inst.id)).toEqual([]);
  });

  it('sends a repeated terminate again, keeping the first deadline; force escalates', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    await service.terminate('org_1', inst.id, false);
    clock.advance(10_000);
    expect((await service.terminate('org_1', inst.id, false)).status).toBe('draining');
    clock.advance(5_000);
    await service.terminate('org_1', inst.id, true);
    expect(dispatcher.stopped.map(([, o]) => [o.timeoutMs, o.force])).toEqual([[60_000, false], [50_000, false], [0, true]]);
  });

  it('re-sends the stop on every reconnect with what is left of its grace until the node reports the container gone; bills to the kill', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    const readyAt = clock.now();
    clock.advance(100_000);
    await service.terminate('org_1', inst.id, false);
    // The agent restarts 20 s into the grace of a container that ignores SIGTERM; nothing is reported.
    clock.advance(20_000);
    await service.onNodeConnected('node-a', new Set([inst.id]), new Map(), clock.now() - 1_000);
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 40_000, force: false }]);
    // It restarts again after the grace: the stop is a kill now.
    clock.advance(50_000);
    await service.onNodeConnected('node-a', new Set([inst.id]), new Map(), clock.now() - 1_000);
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]);
    expect((await service.get('org_1', inst.id)).status).toBe('draining');
    // Killed at 70 s after the request (Docker's FinishedAt); the report arrives 5 s later.
    const killedAt = clock.now();
    clock.advance(5_000);
    await service.onTaskState('node-a', inst.id, 'gone', { stoppedAt: killedAt });
    expect((await service.get('org_1', inst.id)).status).toBe('terminated');
    expect(await sum(inst.id)).toBe(perSecond((killedAt - readyAt) / 1000));
  });

  it('a running report from a draining instance means the stop was lost: it is sent again', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    await service.terminate('org_1', inst.id, false);
    await service.onTaskState('node-a', inst.id, 'running', {});
    expect(dispatcher.stopped).toHaveLength(2);
  });

  it('expiry covers draining: an overdue stop of an expired reservation is sent again, as a kill', async () => {
    const inst = await create({ duration_hours: 1 });
    await service.onTaskState('node-a', inst.id, 'running', {});
    clock.advance(3_600_000);
    expect(await service.expireDue()).toBe(1);
    clock.advance(30_000);
    expect(await service.expireDue()).toBe(0);
    expect(dispatcher.stopped).toHaveLength(1);
    clock.advance(60_000);
    await service.expireDue();
    expect(dispatcher.stopped.at(-1)).toEqual(['node-a', { taskId: inst.id, timeoutMs: 0, force: true }]);
  });

  it('a node away 3 days bills up to when the container really stopped, not to when the control plane heard', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    const readyAt = clock.now();
    const lastContact = readyAt + 3_600_000;
    clock.set(readyAt + 3 * 86_400_000);
    await service.onNodeConnected('node-a', new Set(), new Map(), lastContact);
    // The agent's report of the exit, queued while it was away: 2 h after ready.
    await service.onTaskState('node-a', inst.id, 'exited', { stoppedAt: readyAt + 7_200_000 });
    expect((await service.get('org_1', inst.id)).status).toBe('terminated');
    expect(await sum(inst.id)).toBe(perSecond(7200));
  });

  it('a node away 3 days whose container left no trace bills up to its last contact', async () => {
    const inst = await create();
    await service.onTaskState('node-a', inst.id, 'running', {});
    const readyAt = clock.now();
    clock.set(readyAt + 3 * 86_400_000);
    await service.onNodeConnected('node-a', new Set(), new Map(), readyAt + 3_600_000);
    await service.onTaskState('node-a', inst.id, 'gone', {});
    expect(await sum(inst.id)).toBe(perSecond(3600));
  });

  it('forgetting a lost node ends its instances as of its last contact; reservations keep their charge, unready ones are refunded', async () => {
    const onDemand = await create();
    const reserved = await create({ duration_hours: 24 });
    const unready = await create({ duration_hours: 24 });
    await service.onTaskState('node-a', onDemand.id, 'running', {});
    await service.onTaskState('node-a', reserved.id, 'running', {});
    const readyAt = clock.now();
    dispatcher.connected.delete('node-a');
    clock.advance(30 * 86_400_000);
    const settled = await service.forgetNode('node-a', readyAt + 1_800_000);
    expect(new Map(settled.map((r) => [r.id, r.status]))).toEqual(new Map([[onDemand.id, 'terminated'], [reserved.id, 'terminated'], [unready.id, 'failed']]));
    expect(await sum(onDemand.id)).toBe(perSecond(1800));
    expect((await instances.chargesFor(reserved.id)).map((c) => c.kind)).toEqual(['reservation']);
    expect(await sum(unready.id)).toBe(0);
    expect((await instances.claimedGpuUuids()).size).toBe(0);
    // If the node ever comes back, the containers of its settled instances are stopped.
    dispatcher.connected.add('node-a');
    await service.onNodeConnected('node-a', new Set([onDemand.id]), new Map(), readyAt + 1_800_000);
    expect(dispatcher.stopped).toEqual([['node-a', { taskId: onDemand.id, timeoutMs: 0, force: true }]]);
    expect(await sum(onDemand.id)).toBe(perSecond(1800));
  });
});
