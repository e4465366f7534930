// Model-server replicas end to end: the real control plane (desired replicas from its
// configuration), a real agent process, the real Docker engine and a real HTTP model
// server stand-in from the loopback registry (the catalog's tiny models point at it).
// Changing desired replicas is what an operator does: change the configuration, restart
// the control plane.
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../control-plane/src/config.js';
import { DEFAULT_CATALOG_PATH } from '../control-plane/src/models/catalog.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { MODEL_SERVER_STANDIN_IMAGE } from './support/images.js';
import { eventually, freePort, whileAgentStarts, ROOT, spawnAgent, svcctlJson, type AgentProcess, removeNodeContainers } from './support/node-agent-process.js';

const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'replicas-e2e-'));
const catalogPath = join(dir, 'models.json');
let config: ControlPlaneConfig;
let cp: Awaited<ReturnType<typeof startControlPlane>>;
let agent: AgentProcess;
const agents: AgentProcess[] = [];
let nodeId: string;
let key: string;

interface ReplicaView {
  id: string;
  model: string;
  quantization: string;
  pool: string;
  node_id: string;
  status: string;
  endpoint: string | null;
  restarts: number;
  changed_at: string;
  message: string;
}

function startAgent(token: string): AgentProcess {
  const a = spawnAgent({
    SVC_CONTROL_PLANE: `127.0.0.1:${config.grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, 'agent'),
    SVC_AGENT_HOSTNAME: 'replica-host-e2e',
    SVC_NVML_LIBRARY: join(dir, 'no-nvml.so'),
    SVC_NODE_TOKEN: token,
    SVC_REPLICA_HOST: '127.0.0.1',
    SVC_REPLICA_HEALTH_INTERVAL_MS: '200',
  });
  agents.push(a);
  return a;
}

/** (Re)starts the control plane on the same data dir and gRPC port with these desired replicas. */
async function startCp(replicas: string): Promise<void> {
  config = { ...config, replicas };
  cp = await startControlPlane(config);
  const { org } = await cp.app.services.orgs.ensureDefaultOrg();
  key = (await cp.app.services.keys.create({ orgId: org.id, scopes: ['inference:read'] })).value;
}

const replicas = async (all = false): Promise<ReplicaView[]> =>
  (await svcctlJson<{ data: ReplicaView[] }>(config.dataDir, 'replicas', 'list', ...(all ? ['--all'] : []))).data;
const active = async () => (await cp.app.services.replicas.list({ includeEnded: false, limit: 100 })).filter((r) => r.nodeId === nodeId);
const running = async (model: string) => (await active()).filter((r) => r.model === model && r.status === 'running');
const containersOf = async (replicaId: string) => docker.listContainers({ all: true, filters: { label: [`svc.replica=${replicaId}`] } });
const pools = async (model: string): Promise<string[]> => {
  const res = await fetch(`${cp.baseUrl}/v1/models/${model}`, { headers: { authorization: `Bearer ${key}` } });
  return ((await res.json()) as { pools: string[] }).pools;
};

beforeAll(async () => {
  // The shipped catalog, with the tiny models served by the stand-in instead of the CPU engine.
  const catalog = JSON.parse(readFileSync(DEFAULT_CATALOG_PATH, 'utf8')) as { models: Array<{ id: string; serving: { image: string } }> };
  for (const m of catalog.models) if (m.id.startsWith('tiny-')) m.serving.image = MODEL_SERVER_STANDIN_IMAGE;
  writeFileSync(catalogPath, JSON.stringify(catalog));
  config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    reportIntervalMs: 500,
    // Long enough that an agent restart is not a lost node (which would re-place its replicas).
    nodeDeadlineMs: 20_000,
    modelCatalog: catalogPath,
    replicaReconcileMs: 200,
    replicaStopGraceMs: 2_000,
    logLevel: 'warn',
  });
  await startCp('tiny-chat:int4:na=2,tiny-embed:fp16:na=1');
  agent = startAgent((await cp.app.services.enrollment.createToken()).value);
  nodeId = await whileAgentStarts(agent, async () => (await cp.app.services.nodes.list())[0]?.node.id, 60_000, 'the agent to enroll');
}, 60_000);

afterAll(async () => {
  for (const a of agents) if (a.child.exitCode === null) a.child.kill('SIGKILL');
  if (nodeId) await removeNodeContainers(docker, nodeId);
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('replicas on a real Docker engine', () => {
  it('starts the desired replicas; each reports an endpoint that answers; /v1/models and svcctl show them', async () => {
    await eventually(async () => (await running('tiny-chat')).length === 2 && (await running('tiny-embed')).length === 1, 40_000, 'three running replicas');
    expect(await pools('tiny-chat')).toEqual(['na']);
    expect(await pools('tiny-embed')).toEqual(['na']);
    expect(await pools('llama-3.1-8b-instruct')).toEqual([]);

    // The router's directory has them, with an OpenAI-compatible root that answers.
    const ready = cp.app.services.replicaDirectory.ready({ model: 'tiny-chat', quantization: 'int4', pool: 'na' });
    expect(ready).toHaveLength(2);
    expect(ready[0]).toMatchObject({ model: 'tiny-chat', quantization: 'int4', pool: 'na', nodeId, engine: 'cpu', image: MODEL_SERVER_STANDIN_IMAGE });
    expect((await fetch(`${ready[0]!.baseUrl}/v1/models`)).status).toBe(200);
    // Started with the engine adapter's arguments for the CPU engine.
    expect(await (await fetch(`${ready[0]!.baseUrl}/args`)).text()).toBe(
      '--model /models/tiny-chat-q4_0.gguf --served-model-name tiny-chat --task generate --host 0.0.0.0 --port 8000 --threads 1 --ctx-size 2048\n',
    );
    const [embed] = cp.app.services.replicas.ready({ model: 'tiny-embed' });
    expect(await (await fetch(`${embed!.baseUrl}/args`)).text()).toMatch(/^--model \/models\/tiny-embed-f16\.gguf --served-model-name tiny-embed --task embed /);

    const listed = await replicas();
    expect(listed).toHaveLength(3);
    for (const r of listed) {
      expect(r).toMatchObject({ pool: 'na', node_id: nodeId, status: 'running', restarts: 0 });
      expect(r.endpoint).toMatch(/^127\.0\.0\.1:\d+$/);
      expect((await fetch(`http://${r.endpoint}/health`)).status).toBe(200);
      // Every replica is a labelled container of this node.
      expect((await containersOf(r.id))[0]).toMatchObject({ State: 'running', Labels: expect.objectContaining({ 'svc.node': nodeId, 'svc.label.model': r.model }) });
    }
    // The table on-call reads.
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), 'replicas', 'list'], {
      cwd: ROOT,
      env: { ...process.env, SVC_DATA_DIR: config.dataDir },
    });
    for (const column of ['REPLICA', 'MODEL', 'QUANTIZATION', 'POOL', 'NODE', 'STATUS', 'ENDPOINT', 'RESTARTS', 'LAST CHANGE']) expect(stdout).toContain(column);
    for (const r of listed) expect(stdout).toContain(r.id);
  }, 60_000);

  it('restarts a replica container killed with docker kill: restart count grows, the pool comes back', async () => {
    const [embed] = await running('tiny-embed');
    const [before] = await containersOf(embed!.id);
    await docker.getContainer(before!.Id).kill();

    // While it restarts (1 s backoff, then the server loads) it is not routable: no pool serves the model.
    const restarting = await eventually(async () => (await active()).find((r) => r.id === embed!.id && r.status === 'restarting'), 10_000, 'restarting');
    expect(restarting.message).toBe('exited with code 137; restarting in 1 s');
    await eventually(async () => (await pools('tiny-embed')).length === 0, 10_000, 'the pool to go');
    const restarted = await eventually(
      async () => (await running('tiny-embed')).find((r) => r.id === embed!.id && r.restarts === 1),
      30_000,
      'the replica to run again with one restart',
    );
    const [after] = await containersOf(embed!.id);
    expect(after!.Id).not.toBe(before!.Id);
    expect((await fetch(`http://${restarted.endpoint}/health`)).status).toBe(200);
    expect(await pools('tiny-embed')).toEqual(['na']);
    expect(cp.app.services.replicaDirectory.ready({ model: 'tiny-embed' }).map((r) => r.baseUrl)).toEqual([`http://${restarted.endpoint}`]);
    expect((await replicas()).find((r) => r.id === embed!.id)).toMatchObject({ status: 'running', restarts: 1, message: '' });
  }, 60_000);

  it('re-adopts running replicas after the agent is killed and restarted: same containers, same endpoints', async () => {
    const beforeRecords = await active();
    const beforeContainers = new Map<string, string>();
    for (const r of beforeRecords) beforeContainers.set(r.id, (await containersOf(r.id))[0]!.Id);
    agent.child.kill('SIGKILL');
    await agent.exited;
    await eventually(() => cp.gateway.session(nodeId) === undefined, 10_000, 'the session to end');

    agent = startAgent('');
    await eventually(() => cp.gateway.session(nodeId) !== undefined, 30_000, 'the agent to reconnect');
    // Give the Hello (running replicas with their endpoints) time to be applied.
    await eventually(async () => (await active()).every((r) => r.status === 'running'), 10_000, 'every replica running');
    const afterRecords = await active();
    expect(afterRecords.map((r) => [r.id, r.endpoint, r.restarts]).sort()).toEqual(beforeRecords.map((r) => [r.id, r.endpoint, r.restarts]).sort());
    for (const r of afterRecords) expect((await containersOf(r.id)).map((c) => c.Id)).toEqual([beforeContainers.get(r.id)]);
    expect(agent.output()).toMatch(/tasks recovered/);

    // Still supervised by the new agent: a crash is restarted.
    const [chat] = await running('tiny-chat');
    await docker.getContainer(beforeContainers.get(chat!.id)!).kill();
    await eventually(async () => (await running('tiny-chat')).find((r) => r.id === chat!.id && r.restarts === chat!.restarts + 1), 30_000, 'the re-adopted replica restarted');
  }, 60_000);

  it('stops the surplus container when the desired count is lowered', async () => {
    const chats = await running('tiny-chat');
    expect(chats).toHaveLength(2);
    await cp.app.close();
    await startCp('tiny-chat:int4:na=1,tiny-embed:fp16:na=1');

    const stopped = await eventually(
      async () => (await cp.app.services.replicas.list({ includeEnded: true, limit: 100 })).find((r) => r.model === 'tiny-chat' && r.status === 'stopped'),
      30_000,
      'one tiny-chat replica stopped',
    );
    expect(stopped.message).toBe('surplus: 1 desired for tiny-chat:int4:na');
    expect(await containersOf(stopped.id)).toEqual([]);
    const kept = chats.find((r) => r.id !== stopped.id)!;
    expect(await running('tiny-chat')).toMatchObject([{ id: kept.id }]);
    expect((await containersOf(kept.id))[0]!.State).toBe('running');
    expect(await pools('tiny-chat')).toEqual(['na']);
    expect((await replicas(true)).find((r) => r.id === stopped.id)).toMatchObject({ status: 'stopped' });
  }, 60_000);

  it('stops the replicas of a model removed from the desired replicas', async () => {
    const [embed] = await running('tiny-embed');
    await cp.app.close();
    await startCp('tiny-chat:int4:na=1');

    await eventually(async () => (await cp.app.services.replicas.list({ includeEnded: true, limit: 100 })).find((r) => r.id === embed!.id && r.status === 'stopped'), 30_000, 'tiny-embed stopped');
    expect(await containersOf(embed!.id)).toEqual([]);
    expect(await pools('tiny-embed')).toEqual([]);
    expect(await pools('tiny-chat')).toEqual(['na']);
    expect((await replicas()).map((r) => r.model)).toEqual(['tiny-chat']);
  }, 60_000);

  it('refuses to start with desired replicas the catalog does not have, naming the setting', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/server.ts')], {
      cwd: ROOT,
      env: { ...process.env, SVC_DATA_DIR: join(dir, 'bad'), SVC_HTTP_PORT: '0', SVC_GRPC_PORT: '0', SVC_REPLICAS: 'tiny-chat:int4:na=1,no-such-model:int4:na=1' },
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toMatch(/control plane: invalid setting SVC_REPLICAS \(replicas\): "no-such-model:int4:na=1": unknown model "no-such-model"/);
  }, 30_000);
});
