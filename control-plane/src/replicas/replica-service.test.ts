// The replica service over a real SQLite store. The node registry and the agent gateway
// are its two boundaries; here they are small in-memory stand-ins (test/replicas.e2e.test.ts
// runs the real gateway, agent and Docker).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import type { TaskState__Output } from '@svc/proto';
import { loadCatalog } from '../models/catalog.js';
import { openSqliteStore, type SqliteStore } from '../store/sqlite/sqlite-store.js';
import type { DesiredReplica } from './desired.js';
import type { ReplicaDispatcher, StartReplicaOrder } from './replica-dispatch.js';
import { LiveReplicaDirectory } from './replica-directory.js';
import { ORDER_RESEND_MS, ReplicaService } from './replica-service.js';
import { replicaView } from './views.js';
import type { ReplicaNode } from './reconcile.js';

class Dispatcher implements ReplicaDispatcher {
  connected = new Set<string>();
  started: Array<[string, StartReplicaOrder]> = [];
  stopped: Array<[string, { replicaId: string; timeoutMs: number; force: boolean }]> = [];
  startReplica(nodeId: string, order: StartReplicaOrder): boolean {
    if (!this.connected.has(nodeId)) return false;
    this.started.push([nodeId, order]);
    return true;
  }
  stopReplica(nodeId: string, order: { replicaId: string; timeoutMs: number; force: boolean }): boolean {
    if (!this.connected.has(nodeId)) return false;
    this.stopped.push([nodeId, order]);
    return true;
  }
}

const node = (id: string, over: Partial<ReplicaNode> = {}): ReplicaNode => ({ id, pool: 'na', reachable: true, cordoned: false, draining: false, gpus: [], ...over });
const state = (taskId: string, s: string, over: Partial<TaskState__Output> = {}): TaskState__Output => ({
  task_id: taskId,
  kind: 'REPLICA',
  state: s,
  message: '',
  exit_code: 0,
  pull_progress: 0,
  endpoint: '',
  at_ms: 0,
  stopped_at_ms: 0,
  access: null,
  ...over,
});

const catalog = loadCatalog();
let dir: string;
let store: SqliteStore;
let nodes: ReplicaNode[];
let dispatcher: Dispatcher;
let clock: ManualClock;
let directory: LiveReplicaDirectory;

function service(desired: DesiredReplica[]): ReplicaService {
  return new ReplicaService(
    store.replicas,
    catalog,
    desired,
    { nodes: async () => nodes },
    dispatcher,
    directory,
    clock,
    { cpuThreads: 2, stopGraceMs: 30_000 },
    pino({ level: 'silent' }),
  );
}

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'replica-service-'));
  store = openSqliteStore(dir);
  nodes = [node('n1')];
  dispatcher = new Dispatcher();
  dispatcher.connected.add('n1');
  clock = new ManualClock();
  directory = new LiveReplicaDirectory();
});

afterEach(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

const chat = (count: number): DesiredReplica => ({ model: 'tiny-chat', quantization: 'int4', pool: 'na', count });

describe('ReplicaService', () => {
  it('places the desired replica and orders its start with the engine adapter spec', async () => {
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    const [record] = await store.replicas.listActive();
    expect(record).toMatchObject({ model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId: 'n1', status: 'scheduled', engine: 'cpu', restarts: 0 });
    expect(dispatcher.started).toEqual([
      [
        'n1',
        {
          replicaId: record!.id,
          image: '127.0.0.1:5000/svc/cpu-engine:3',
          args: ['--model', '/models/tiny-chat-q4_0.gguf', '--served-model-name', 'tiny-chat', '--task', 'generate', '--host', '0.0.0.0', '--port', '8000', '--threads', '2', '--ctx-size', '2048'],
          env: { SVC_ENGINE_API_KEY: expect.stringMatching(/^[\w-]{43}$/), SVC_REPLICA_ID: record!.id },
          labels: { model: 'tiny-chat', quantization: 'int4', pool: 'na' },
          gpuUuids: [],
          containerPort: 8000,
          healthPath: '/health',
        },
      ],
    ]);
    // The replica's key is kept with it (the same one on every re-send and after a restart).
    expect(dispatcher.started[0]![1].env.SVC_ENGINE_API_KEY).toBe(record!.env.SVC_ENGINE_API_KEY);
    // A second pass changes nothing.
    await replicas.reconcile();
    expect(await store.replicas.listActive()).toHaveLength(1);
    expect(dispatcher.started).toHaveLength(1);
  });

  it('gives every replica a key of its own, which the directory hands the router and the operator view leaves out', async () => {
    const replicas = service([chat(2)]);
    await replicas.reconcile();
    const records = await store.replicas.listActive();
    const keys = records.map((r) => r.env.SVC_ENGINE_API_KEY);
    expect(new Set(keys).size).toBe(2);
    for (const record of records) {
      await replicas.onTaskState('n1', state(record.id, 'running', { endpoint: `127.0.0.1:${40000 + records.indexOf(record)}` }));
      expect(JSON.stringify(replicaView((await store.replicas.get(record.id))!))).not.toContain(record.env.SVC_ENGINE_API_KEY);
    }
    expect(replicas.ready().map((r) => r.apiKey).sort()).toEqual([...keys].sort());
  });

  it('follows agent reports into the directory: running with the endpoint is routable, unhealthy is not', async () => {
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    const [record] = await store.replicas.listActive();
    await replicas.onTaskState('n1', state(record!.id, 'pulling'));
    await replicas.onTaskState('n1', state(record!.id, 'starting', { endpoint: '127.0.0.1:40001' }));
    expect(replicas.ready()).toEqual([]);
    await replicas.onTaskState('n1', state(record!.id, 'running', { endpoint: '127.0.0.1:40001' }));
    expect(replicas.ready({ model: 'tiny-chat' })).toMatchObject([{ id: record!.id, baseUrl: 'http://127.0.0.1:40001', pool: 'na' }]);
    expect(directory.poolsServing('tiny-chat')).toEqual(['na']);
    expect(await store.replicas.get(record!.id)).toMatchObject({ status: 'running', readyAt: clock.now(), endpoint: '127.0.0.1:40001' });

    await replicas.onTaskState('n1', state(record!.id, 'unhealthy', { message: 'health check answered HTTP 503', endpoint: '127.0.0.1:40001' }));
    expect(replicas.ready()).toEqual([]);
    await replicas.onTaskState('n1', state(record!.id, 'restarting', { message: 'exited with code 137; restarting in 1 s' }));
    await replicas.onTaskState('n1', state(record!.id, 'running', { endpoint: '127.0.0.1:40002' }));
    expect(replicas.ready()[0]!.baseUrl).toBe('http://127.0.0.1:40002');
    expect(await store.replicas.get(record!.id)).toMatchObject({ status: 'running', restarts: 1, message: '' });
    // Reports from another node about this replica are not believed.
    await replicas.onTaskState('n2', state(record!.id, 'restarting'));
    expect((await store.replicas.get(record!.id))!.status).toBe('running');
  });

  it('re-sends a start that found no session, once the resend time passed', async () => {
    dispatcher.connected.clear();
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    expect(dispatcher.started).toEqual([]);
    dispatcher.connected.add('n1');
    await replicas.reconcile();
    expect(dispatcher.started).toHaveLength(1); // never sent before: at once
    await replicas.reconcile();
    expect(dispatcher.started).toHaveLength(1);
    clock.advance(ORDER_RESEND_MS);
    await replicas.reconcile();
    expect(dispatcher.started).toHaveLength(2); // no answer for 10 s: again
  });

  it('stops surplus replicas gracefully and records why; the agent gone report ends them', async () => {
    await service([chat(2)]).reconcile();
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    const [stop] = dispatcher.stopped;
    expect(stop).toEqual(['n1', { replicaId: expect.stringMatching(/^rep_/), timeoutMs: 30_000, force: false }]);
    expect(await store.replicas.get(stop![1].replicaId)).toMatchObject({ status: 'stopping', message: 'surplus: 1 desired for tiny-chat:int4:na' });
    await replicas.onTaskState('n1', state(stop![1].replicaId, 'gone'));
    expect(await store.replicas.get(stop![1].replicaId)).toMatchObject({ status: 'stopped', message: 'surplus: 1 desired for tiny-chat:int4:na', endedAt: clock.now() });
    expect(await store.replicas.listActive()).toHaveLength(1);
  });

  it('loses the replicas of an unreachable node and places replacements elsewhere', async () => {
    nodes = [node('n1'), node('n2', { cordoned: true })];
    dispatcher.connected.add('n2');
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    const [first] = await store.replicas.listActive();
    await replicas.onTaskState('n1', state(first!.id, 'running', { endpoint: '127.0.0.1:40001' }));
    nodes = [node('n1', { reachable: false }), node('n2')];
    await replicas.onNodeLost('n1');
    expect(await store.replicas.get(first!.id)).toMatchObject({ status: 'lost', message: 'node n1 is unreachable' });
    expect(replicas.ready()).toEqual([]);
    expect((await store.replicas.listActive()).map((r) => r.nodeId)).toEqual(['n2']);

    // Its node speaks again, still running it: its GPUs may be an instance's by now, so it is killed.
    await replicas.onTaskState('n1', state(first!.id, 'running', { endpoint: '127.0.0.1:40001' }));
    expect(dispatcher.stopped).toEqual([['n1', { replicaId: first!.id, timeoutMs: 0, force: true }]]);
    expect(await store.replicas.get(first!.id)).toMatchObject({ status: 'lost' });
  });

  it('claims GPUs for vLLM replicas in gpu_claims and releases them when the replica ends', async () => {
    const uuids = ['GPU-a', 'GPU-b'];
    nodes = [node('g1', { gpus: uuids.map((uuid) => ({ uuid, healthy: true, claimed: false })) })];
    dispatcher.connected.add('g1');
    const llama: DesiredReplica = { model: 'llama-3.1-8b-instruct', quantization: 'fp8', pool: 'na', count: 1 };
    await service([llama]).reconcile();
    const [record] = await store.replicas.listActive();
    expect(record!.gpuUuids).toEqual(['GPU-a']);
    expect(dispatcher.started[0]![1].args).toEqual(expect.arrayContaining(['--quantization', 'fp8']));
    expect((await store.nodes.listClaims()).map((c) => [c.gpuUuid, c.owner])).toEqual([['GPU-a', record!.id]]);
    // An instance racing for the same GPU loses (one gpu_claims table for both).
    expect(await store.nodes.claimGpus('g1', ['GPU-a'], 'inst_x', clock.now())).toBe(false);

    const replicas = service([]);
    await replicas.reconcile();
    await replicas.onTaskState('g1', state(record!.id, 'gone'));
    expect(await store.nodes.listClaims()).toEqual([]);
  });

  it('settles a reconnecting node: states from Hello, a start for what it lost, a stop for what nobody wants', async () => {
    const replicas = service([chat(2)]);
    await replicas.reconcile();
    const [a, b] = await store.replicas.listActive();
    await replicas.onTaskState('n1', state(a!.id, 'running', { endpoint: '127.0.0.1:40001' }));
    await replicas.onTaskState('n1', state(b!.id, 'running', { endpoint: '127.0.0.1:40002' }));
    dispatcher.started = [];

    // Hello after an agent restart: a still runs (re-adopted), b is gone, and a stray replica runs.
    await replicas.onNodeConnected('n1', [state(a!.id, 'running', { endpoint: '127.0.0.1:40001' }), state('rep_stray', 'running')]);
    expect(await store.replicas.get(a!.id)).toMatchObject({ status: 'running', restarts: 0 });
    expect(await store.replicas.get(b!.id)).toMatchObject({ status: 'scheduled', restarts: 1, endpoint: null });
    expect(dispatcher.started.map(([, o]) => o.replicaId)).toEqual([b!.id]);
    expect(dispatcher.stopped).toEqual([['n1', { replicaId: 'rep_stray', timeoutMs: 0, force: true }]]);
    expect(replicas.ready().map((r) => r.id)).toEqual([a!.id]);
  });

  it('fills the directory from the store when the control plane starts', async () => {
    const replicas = service([chat(1)]);
    await replicas.reconcile();
    const [record] = await store.replicas.listActive();
    await replicas.onTaskState('n1', state(record!.id, 'running', { endpoint: '127.0.0.1:40001' }));
    directory = new LiveReplicaDirectory();
    const restarted = service([chat(1)]);
    await restarted.load();
    expect(restarted.ready().map((r) => r.id)).toEqual([record!.id]);
  });
});
