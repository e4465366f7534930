// Several control-plane replicas on one PostgreSQL (issue 12): three real control-plane
// processes on one real PostgreSQL server, behind HAProxy running the shipped
// deploy/haproxy/control-plane.cfg (only its `bind` and `server` lines replaced), and one
// real agent with fake-NVML GPUs that names all three gRPC addresses, replica 1 first.
//
// What a tenant and an operator see: a key made on one replica works on another; a revoke
// on one is refused by all within 1 s; one key's rate limit holds across the three; an
// instance created through a replica that does not hold the agent's stream starts at once;
// when the replica holding the stream is SIGKILLed the agent is on another within 5 s,
// the node never turns unreachable, the instance's container runs on, and a terminate
// through yet another replica ends it.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { systemClock } from '@svc/shared';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServices } from '../control-plane/src/app.js';
import { loadControlPlaneConfig } from '../control-plane/src/config.js';
import { OperatorKeyService } from '../control-plane/src/operators/operator-key-service.js';
import { openPostgresStore } from '../control-plane/src/store/postgres/postgres-store.js';
import { spawnControlPlane, type ControlPlaneProcess } from './support/control-plane-process.js';
import { fakeGpuNode } from './support/fake-gpu-node.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { startLoadBalancer, type LoadBalancer } from './support/haproxy.js';
import { eventually, freePort, removeNodeContainers, whileAgentStarts, type AgentProcess } from './support/node-agent-process.js';
import { startPostgres, type TestPostgres } from './support/postgres.js';

const REPLICAS = 3;
/**
 * The rate-limit case runs at tier 3, set low for this suite (the default org stays at
 * tier 2's 1,200 per minute). Why not 1,300 requests at 1,200 per minute: on a shared
 * 2-core host the three replicas answer 80-130 requests/s, so such a burst lasts 10-16 s
 * and a correct limiter legitimately refills 200-300 requests meanwhile; the test could
 * not tell one fleet-wide limit from three. At 120 per minute, 400 requests (~3x the
 * limit) separate the two whatever the host's speed: one limit admits about 120, three
 * admit about 360.
 */
const LIMITED_PER_MINUTE = 120;
const LIMITED_REQUESTS = 400;

let dir: string;
let postgres: TestPostgres | undefined;
const replicas: ControlPlaneProcess[] = [];
let grpcPorts: number[];
let lb: LoadBalancer | undefined;
let lbUrl: string;
let agent: AgentProcess | undefined;
let nodeId = '';
let adminKey: string;
let operatorKey: string;
const docker = new Docker();

type Answer = { status: number; body: any };
async function call(base: string, key: string, method: string, path: string, body?: unknown): Promise<Answer> {
  const res = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}
const replica = (n: number) => replicas[n - 1]!.baseUrl;
const node = async () => (await call(lbUrl, operatorKey, 'GET', `/ops/v1/nodes/${nodeId}`)).body as { status: string; connected_at: string | null };
const instance = async (base: string, id: string) => (await call(base, adminKey, 'GET', `/v1/instances/${id}`)).body as { status: string };
/** The agent's own log lines (JSON), parsed. */
const agentLines = () =>
  agent!
    .output()
    .split('\n')
    .flatMap((text) => {
      try {
        return [JSON.parse(text) as Record<string, unknown>];
      } catch {
        return [];
      }
    });
const container = async (id: string) => {
  const [found] = await docker.listContainers({ all: true, filters: { label: [`svc.instance=${id}`] } });
  if (!found) return undefined;
  const state = (await docker.getContainer(found.Id).inspect()).State;
  return { running: state.Running, startedAt: state.StartedAt };
};

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'replicas-pg-'));
  postgres = await startPostgres();
  const databaseUrl = await postgres.createDatabase();
  grpcPorts = [];
  const httpPorts: number[] = [];
  for (let i = 0; i < REPLICAS; i++) {
    grpcPorts.push(await freePort());
    httpPorts.push(await freePort());
  }
  const env = {
    SVC_DATABASE_URL: databaseUrl,
    SVC_DATABASE_POOL_SIZE: '5',
    SVC_REPORT_INTERVAL_MS: '500',
    // Short, so a replica that wrongly counted another replica's agent as silent would show it.
    SVC_NODE_DEADLINE_MS: '4000',
    SVC_TERMINATION_GRACE_MS: '2000',
    SVC_RATE_LIMIT_TIER3: String(LIMITED_PER_MINUTE),
  };

  // The org, an admin key, an operator key and the node's enrollment token, written the way svcctl writes them.
  const store = await openPostgresStore(databaseUrl, { poolSize: 2 });
  let token: string;
  try {
    const services = buildServices({ config: loadControlPlaneConfig({ ...process.env, ...env, SVC_DATA_DIR: join(dir, 'seed') }), store });
    const { org } = await services.orgs.ensureDefaultOrg();
    adminKey = (await services.keys.create({ orgId: org.id, admin: true })).value;
    token = (await services.enrollment.createToken()).value;
    operatorKey = (await new OperatorKeyService(store.operators, systemClock).create({ scopes: ['operator:read', 'operator:write'], createdBy: 'test' })).value;
  } finally {
    await store.close();
  }

  // Started together, as a deployment rolls them out.
  replicas.push(
    ...(await Promise.all(
      grpcPorts.map((grpc, i) => spawnControlPlane({ ...env, SVC_GRPC_PORT: String(grpc), SVC_HTTP_PORT: String(httpPorts[i]), SVC_DATA_DIR: join(dir, `cp${i + 1}`) })),
    )),
  );

  const lbPort = await freePort();
  lb = await startLoadBalancer(dir, `127.0.0.1:${lbPort}`, `http://127.0.0.1:${lbPort}`, httpPorts);
  lbUrl = lb.url;

  const gpuNode = await fakeGpuNode(dir, 'replicas', 2);
  agent = gpuNode.spawn(grpcPorts[0]!, token, { SVC_CONTROL_PLANE: grpcPorts.map((p) => `127.0.0.1:${p}`).join(',') });
  nodeId = await whileAgentStarts(
    agent,
    async () => {
      const nodes = (await call(lbUrl, operatorKey, 'GET', '/ops/v1/nodes')).body.data as Array<{ id: string; status: string; gpus_total: number }>;
      return nodes.find((n) => n.status === 'ready' && n.gpus_total === 2)?.id;
    },
    60_000,
    'the node to be ready with its GPUs',
  );
  // Its stream is held by replica 1, the first address it dials.
  await replicas[0]!.line((l) => (l.msg === 'agent session open' && l.node === nodeId ? true : undefined));
}, 240_000);

afterAll(async () => {
  for (const r of replicas) await r.kill();
  await lb?.stop();
  if (agent && agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
  await agent?.exited;
  if (nodeId) await removeNodeContainers(docker, nodeId);
  await postgres?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('API keys across replicas', () => {
  it('a key created on replica 1 works on replica 3 (and through the load balancer)', async () => {
    const created = await call(replica(1), adminKey, 'POST', '/v1/admin/keys', { name: 'made on 1', scopes: ['inference:read'] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect((await call(replica(3), created.body.key, 'GET', '/v1/models')).status).toBe(200);
    expect((await call(lbUrl, created.body.key, 'GET', '/v1/models')).status).toBe(200);
  });

  it('a key revoked on replica 2 is refused on all three within 1 s', async () => {
    const created = await call(replica(1), adminKey, 'POST', '/v1/admin/keys', { name: 'revoked on 2', scopes: ['inference:read'] });
    const key = created.body.key as string;
    // Every replica has verified (and may cache) the key.
    for (let n = 1; n <= REPLICAS; n++) expect((await call(replica(n), key, 'GET', '/v1/models')).status).toBe(200);
    const revoked = await call(replica(2), adminKey, 'POST', `/v1/admin/keys/${created.body.key_id}/revoke`, {});
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    const refused = await Promise.all(
      [1, 2, 3].map((n) =>
        eventually(async () => ((await call(replica(n), key, 'GET', '/v1/models')).status === 401 ? true : undefined), 1_000, `replica ${n} to refuse the revoked key`, 20),
      ),
    );
    expect(refused).toEqual([true, true, true]);
  });

  it(`one key's ${LIMITED_PER_MINUTE} requests per minute hold across the three replicas: ${LIMITED_REQUESTS} requests spread over them admit the limit, not three times it`, { timeout: 90_000 }, async () => {
    const org = await call(replica(1), operatorKey, 'POST', '/ops/v1/orgs', { name: 'limited-org', tier: 3 });
    expect(org.status, JSON.stringify(org.body)).toBe(201);
    const created = await call(replica(1), operatorKey, 'POST', '/ops/v1/keys', { org: org.body.id, scopes: ['inference:read'] });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const key = created.body.key as string;
    const statuses: number[] = [];
    const started = Date.now();
    let next = 0;
    // 24 clients at a time, request i to replica i mod 3.
    await Promise.all(
      Array.from({ length: 24 }, async () => {
        for (let i = next++; i < LIMITED_REQUESTS; i = next++) {
          const res = await fetch(`${replica((i % REPLICAS) + 1)}/v1/models`, { headers: { authorization: `Bearer ${key}` } });
          await res.arrayBuffer();
          statuses.push(res.status);
        }
      }),
    );
    const elapsedMs = Date.now() - started;
    const admitted = statuses.filter((s) => s === 200).length;
    const limited = statuses.filter((s) => s === 429).length;
    // The limit refills continuously: a burst lasting t seconds may also spend what refilled meanwhile, nothing more.
    const refilled = Math.ceil((elapsedMs / 60_000) * LIMITED_PER_MINUTE);
    process.stdout.write(`rate limit across replicas: ${JSON.stringify({ admitted, limited, elapsed_ms: elapsedMs, refilled_during_burst: refilled })}\n`);
    expect(admitted + limited).toBe(LIMITED_REQUESTS);
    expect(admitted).toBeGreaterThanOrEqual(LIMITED_PER_MINUTE);
    expect(admitted).toBeLessThanOrEqual(LIMITED_PER_MINUTE + refilled);
  });
});

describe('an instance on a node whose stream another replica holds', () => {
  /** Kept running through the failover, then terminated. */
  let id: string;
  /** Terminated through a replica while the agent is between replicas. */
  let second: string;

  it('created through replica 3 for the agent connected to replica 1: the start reaches the agent at once and the instance is ready', { timeout: 90_000 }, async () => {
    const before = Date.now();
    const create = () => call(replica(3), adminKey, 'POST', '/v1/instances', { sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE, labels: { case: 'replicas' } });
    const [created, other] = await Promise.all([create(), create()]);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(other.status, JSON.stringify(other.body)).toBe(201);
    id = created.body.id;
    second = other.body.id;
    const answeredAt = Date.now();
    for (const each of [id, second]) await eventually(async () => ((await instance(lbUrl, each)).status === 'ready' ? true : undefined), 60_000, `instance ${each} to be ready`);
    const readyAt = Date.now();
    const received = agentLines().find((l) => l.msg === 'command' && l.command === 'start_task' && l.task_id === id);
    expect(received, 'the agent logged the start order').toBeDefined();
    const receivedAt = Date.parse(received!.time as string);
    const measured = { create_answer_ms: answeredAt - before, start_at_agent_after_answer_ms: receivedAt - answeredAt, both_ready_after_answer_ms: readyAt - answeredAt };
    process.stdout.write(`instance through another replica: ${JSON.stringify(measured)}\n`);
    // Woken by NOTIFY, not by the agent's next reconnect or a poll: well under the 1 s poll
    // (generous for a loaded 2-core host; the printed value is the measurement).
    expect(measured.start_at_agent_after_answer_ms).toBeLessThan(1_000);
    expect((await container(id))?.running).toBe(true);
    expect((await container(second))?.running).toBe(true);
  });

  it('SIGKILL of the replica holding the stream: the agent is on another within 5 s, the node never turns unreachable, a terminate sent meanwhile is carried out, the other container runs on, and a terminate through the replica that does not hold the stream ends it', { timeout: 90_000 }, async () => {
    const containerBefore = await container(id);
    expect(containerBefore?.running).toBe(true);
    const killedAt = Date.now();
    await replicas[0]!.kill();

    // Terminated through replica 3 while the agent is between replicas (replica 3 may still
    // think replica 1 holds the stream): the stop waits in the store for the next holder.
    const stopped = await call(replica(3), adminKey, 'POST', `/v1/instances/${second}/terminate`, { force: true });
    expect(stopped.status, JSON.stringify(stopped.body)).toBe(200);

    // The load balancer keeps answering: requests go to the live replicas.
    for (let i = 0; i < 6; i++) expect((await call(lbUrl, adminKey, 'GET', '/v1/instances?limit=1')).status).toBe(200);

    const back = await eventually(
      async () => {
        const n = await node();
        return n.status === 'ready' && n.connected_at && Date.parse(n.connected_at) >= killedAt - 5 ? Date.parse(n.connected_at) : undefined;
      },
      20_000,
      'the node to have a new session',
    );
    // Which of the two survivors holds the stream now (the agent dials the next address first).
    const holder = await Promise.any(
      [2, 3].map((n) => replicas[n - 1]!.line((l) => (l.msg === 'agent session open' && l.node === nodeId ? n : undefined), 5_000)),
    );
    const bystander = holder === 2 ? 3 : 2;
    process.stdout.write(`failover: ${JSON.stringify({ reconnected_after_kill_ms: back - killedAt, new_holder: `replica ${holder}` })}\n`);
    expect(back - killedAt).toBeLessThanOrEqual(5_000);

    // The other instance's stop reached the agent through the new holder.
    await eventually(async () => ((await instance(lbUrl, second)).status === 'terminated' ? true : undefined), 30_000, `instance ${second} to be terminated`);
    expect((await container(second))?.running ?? false).toBe(false);
    // The kept instance ran on: the same container, never restarted, and still `ready`.
    expect(await container(id)).toEqual(containerBefore);
    expect((await instance(lbUrl, id)).status).toBe('ready');

    // Terminated through the survivor that does not hold the stream: the stop is relayed to the holder.
    const terminated = await call(replica(bystander), adminKey, 'POST', `/v1/instances/${id}/terminate`, {});
    expect(terminated.status, JSON.stringify(terminated.body)).toBe(200);
    await eventually(async () => ((await instance(replica(holder), id)).status === 'terminated' ? true : undefined), 30_000, `instance ${id} to be terminated`);
    expect((await container(id))?.running ?? false).toBe(false);

    // No replica ever counted the node as silent: its timeline has no node_down.
    const timeline = (await call(lbUrl, operatorKey, 'GET', `/ops/v1/nodes/${nodeId}/timeline?limit=100`)).body;
    const kinds = (timeline.data as Array<{ kind: string }>).map((e) => e.kind);
    expect(kinds).not.toContain('node_down');
    expect((await node()).status).toBe('ready');
  });
});
