// GPU instances end to end: the real control plane, a real agent process with GPUs from
// the fake libnvidia-ml (through the same FFI path as real NVML), the real Docker engine
// and images pulled from the loopback registry.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeNvml, FakeNvmlStateFile } from 'node-nvml-bindings';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { MISSING_COMMAND_IMAGE, SLEEPER_IMAGE, STUBBORN_IMAGE, REGISTRY } from './support/images.js';
import { eventually, freePort, spawnAgent, type AgentProcess, removeNodeContainers } from './support/node-agent-process.js';
import { startStallingRegistry } from './support/stalling-registry.js';
import { WebhookReceiver } from '../control-plane/test/webhooks-support.js';

const GRACE_MS = 2_000;
/** The agent gives up a pull that moves less than 1 MiB in this long (SVC_PULL_STALL_SECONDS). */
const PULL_STALL_SECONDS = 3;
const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'instances-e2e-'));
let config: ControlPlaneConfig;
let cp: Awaited<ReturnType<typeof startControlPlane>>;
let libraryPath: string;
let gpuState: FakeNvmlStateFile;
let agent: AgentProcess;
let nodeId: string;
let key: string;
const agents: AgentProcess[] = [];
let receiver: WebhookReceiver;

function startAgent(token: string): AgentProcess {
  const a = spawnAgent({
    SVC_CONTROL_PLANE: `127.0.0.1:${config.grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, 'agent'),
    SVC_AGENT_HOSTNAME: 'gpu-host-e2e',
    SVC_NVML_LIBRARY: libraryPath,
    SVC_NODE_TOKEN: token,
    SVC_PULL_STALL_SECONDS: String(PULL_STALL_SECONDS),
    // The loopback registry and the hostile ones the tests start, on any port of 127.0.0.1.
    SVC_INSTANCE_PRIVATE_REGISTRIES: '127.0.0.1',
    ...gpuState.env(),
  });
  agents.push(a);
  return a;
}

interface Instance {
  id: string;
  status: string;
  failure_reason: string | null;
  ready_at: string | null;
  node_id: string;
  progress: unknown;
}

async function api(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(cp.baseUrl + path, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const create = (body: Record<string, unknown>) => api('POST', '/v1/instances', { sku: 'h100-80gb', gpus: 1, ...body });
const read = async (id: string): Promise<Instance> => (await api('GET', `/v1/instances/${id}`)).body;
const waitFor = (id: string, statuses: string[], ms = 30_000) =>
  eventually(async () => {
    const inst = await read(id);
    return statuses.includes(inst.status) ? inst : undefined;
  }, ms, `instance ${id} to be ${statuses.join(' or ')}`);
const containersOf = (id: string) => docker.listContainers({ all: true, filters: { label: [`svc.instance=${id}`] } });
const lifecycle = async (id: string) =>
  (await cp.store.events.list({ type: 'instance.lifecycle', limit: 1000 })).filter((e) => e.subject === id).map((e) => e.data as Instance);

beforeAll(async () => {
  libraryPath = await buildFakeNvml();
  gpuState = new FakeNvmlStateFile(join(dir, 'gpus.state'), { gpus: [{}, {}] });
  config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    reportIntervalMs: 500,
    nodeDeadlineMs: 2_000,
    terminationGraceMs: GRACE_MS,
    logLevel: 'warn',
    // The webhook receiver listens on loopback: an operator exception.
    webhookAllowedTargets: ['127.0.0.1'],
  });
  cp = await startControlPlane(config);
  const { org } = await cp.app.services.orgs.ensureDefaultOrg();
  key = (await cp.app.services.keys.create({ orgId: org.id, scopes: ['compute:write', 'compute:read', 'billing:read'] })).value;
  // Every instance.lifecycle event goes to a receiver that verifies it with standardwebhooks.
  receiver = await WebhookReceiver.start();
  const hook = await cp.app.services.webhooks.create({ orgId: org.id, url: receiver.url, eventTypes: ['instance.lifecycle'] });
  receiver.secrets = [hook.secret];
  agent = startAgent((await cp.app.services.enrollment.createToken()).value);
  const skus = await eventually(async () => {
    const res = await api('GET', '/v1/skus');
    const h100 = res.body.data.find((s: { id: string }) => s.id === 'h100-80gb');
    return h100.pools.some((p: { free_gpus: number }) => p.free_gpus === 2) ? h100 : undefined;
  }, 30_000, 'the agent to register 2 GPUs');
  expect(skus.pools[0].pool).toBe('na');
  nodeId = (await cp.app.services.nodes.list())[0]!.node.id;
}, 60_000);

afterAll(async () => {
  for (const a of agents) if (a.child.exitCode === null) a.child.kill('SIGKILL');
  if (nodeId) await removeNodeContainers(docker, nodeId);
  await cp?.app.close();
  await receiver?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe('instances on a real Docker engine', () => {
  it('pulls (progress reported), becomes ready with a labelled container, and terminates gracefully', async () => {
    // A real pull: the image is not on the host.
    await docker.getImage(SLEEPER_IMAGE).remove({ force: true }).catch(() => undefined);
    const created = await create({ image: SLEEPER_IMAGE, labels: { team: 'e2e' } });
    expect(created.status).toBe(201);
    expect(created.body.status).toBe('provisioning');
    const ready = await waitFor(created.body.id, ['ready']);
    expect(ready.node_id).toBe(nodeId);

    const seen = await lifecycle(ready.id);
    expect(seen.map((i) => i.status)).toEqual(['provisioning', 'starting', 'ready']);
    expect(seen[1]!.progress).toMatchObject({ phase: 'pulling' });

    const [container] = await containersOf(ready.id);
    expect(container).toMatchObject({ State: 'running', Labels: expect.objectContaining({ 'svc.node': nodeId, 'svc.label.team': 'e2e' }) });
    expect((await api('GET', '/v1/instances?status=ready')).body.data.map((i: Instance) => i.id)).toContain(ready.id);

    // The sleeper traps SIGTERM and exits at once: well inside the grace.
    const started = Date.now();
    expect((await api('POST', `/v1/instances/${ready.id}/terminate`)).body.status).toBe('draining');
    await waitFor(ready.id, ['terminated']);
    expect(Date.now() - started).toBeLessThan(GRACE_MS);
    expect(await containersOf(ready.id)).toEqual([]);
    const charges = (await api('GET', '/v1/billing/charges')).body.data.filter((c: { instance_id: string }) => c.instance_id === ready.id);
    // One line at its end (two if a full hour passed while it ran: hourly accrual, then the rest).
    expect(charges.length).toBeGreaterThan(0);
    expect(charges.every((c: { kind: string }) => c.kind === 'on_demand')).toBe(true);

    // The whole run reached the webhook receiver, signed, in order, with the instance object.
    const delivered = () => receiver.requests.filter((r) => r.event.data.id === ready.id);
    await eventually(() => delivered().length === 5, 10_000, 'five lifecycle deliveries');
    expect(delivered().map((r) => r.event.data.status)).toEqual(['provisioning', 'starting', 'ready', 'draining', 'terminated']);
    expect(delivered().every((r) => r.verifiedWith.length === 1 && r.event.type === 'instance.lifecycle' && r.event.data.object === 'instance')).toBe(true);
  }, 60_000);

  it('kills a container that ignores SIGTERM after the grace', async () => {
    const { body } = await create({ image: STUBBORN_IMAGE });
    await waitFor(body.id, ['ready']);
    await new Promise((r) => setTimeout(r, 300)); // let the trap be installed
    const started = Date.now();
    await api('POST', `/v1/instances/${body.id}/terminate`);
    await waitFor(body.id, ['terminated']);
    expect(Date.now() - started).toBeGreaterThanOrEqual(GRACE_MS);
    expect(await containersOf(body.id)).toEqual([]);
  }, 60_000);

  it('force-terminates without the grace', async () => {
    const { body } = await create({ image: STUBBORN_IMAGE });
    await waitFor(body.id, ['ready']);
    const started = Date.now();
    await api('POST', `/v1/instances/${body.id}/terminate`, { force: true });
    await waitFor(body.id, ['terminated']);
    expect(Date.now() - started).toBeLessThan(GRACE_MS);
  }, 60_000);

  it('fails a pull of a missing image with a reason and charges nothing', async () => {
    const { body } = await create({ image: `${REGISTRY}/svc/does-not-exist:1` });
    const failed = await waitFor(body.id, ['failed']);
    expect(failed.failure_reason).toMatch(/pull failed/);
    const charges = (await api('GET', '/v1/billing/charges?limit=100')).body.data;
    expect(charges.filter((c: { instance_id: string }) => c.instance_id === body.id)).toEqual([]);
  }, 60_000);

  it("fails an image from a registry on the node's own network, says why, charges nothing, and never asks that registry", async () => {
    // The loopback registry by another name: the node's own network, which only the operator's listed registries may be pulled from.
    const image = SLEEPER_IMAGE.replace(REGISTRY, 'localhost:5000');
    const { body } = await create({ image });
    const failed = await waitFor(body.id, ['failed']);
    expect(failed.failure_reason).toBe('pull failed: image registry localhost:5000 resolves to a loopback address: instances pull only from registries on public addresses');
    const charges = (await api('GET', '/v1/billing/charges?limit=100')).body.data;
    expect(charges.filter((c: { instance_id: string }) => c.instance_id === body.id)).toEqual([]);
    await expect(docker.getImage(image).inspect()).rejects.toMatchObject({ statusCode: 404 });
  }, 60_000);

  it('fails an image whose command is not in it before it runs, says which, and charges nothing', async () => {
    const { body } = await create({ image: MISSING_COMMAND_IMAGE });
    const failed = await waitFor(body.id, ['failed']);
    expect(failed.failure_reason).toMatch(/^start failed: the command "serve" on the image's PATH \(.*\/usr\/bin.*\) does not exist in the image$/);
    expect(failed.ready_at).toBeNull();
    const charges = (await api('GET', '/v1/billing/charges?limit=100')).body.data;
    expect(charges.filter((c: { instance_id: string }) => c.instance_id === body.id)).toEqual([]);
    expect(await containersOf(body.id)).toEqual([]);
  }, 60_000);

  it("runs none of the node's images a tenant names by an ID or a prefix of one: the API refuses IDs, a prefix fails as the pull it is, unbilled", async () => {
    // The node holds images no tenant may run (the provider's model servers); a prefix of
    // one's ID is what Docker would have run.
    const id = (await docker.getImage(SLEEPER_IMAGE).inspect()).Id;
    const refused = await create({ image: id });
    expect(refused.status).toBe(400);
    expect(refused.body.error).toMatchObject({ type: 'invalid_request', param: 'image', message: expect.stringContaining('names an image by its ID') });
    const { body } = await create({ image: id.slice('sha256:'.length, 'sha256:'.length + 12) });
    const failed = await waitFor(body.id, ['failed', 'ready'], 60_000);
    expect(failed.status).toBe('failed');
    expect(failed.failure_reason).toMatch(/^pull failed/);
    const charges = (await api('GET', '/v1/billing/charges?limit=100')).body.data;
    expect(charges.filter((c: { instance_id: string }) => c.instance_id === body.id)).toEqual([]);
    expect(await containersOf(body.id)).toEqual([]);
  }, 90_000);

  it("fails an instance whose registry stops sending, unbilled, and gives its GPU back", async () => {
    const registry = await startStallingRegistry();
    try {
      const { body } = await create({ image: registry.image });
      expect(body.status).toBe('provisioning');
      const failed = await waitFor(body.id, ['failed'], 60_000);
      expect(failed.failure_reason).toContain(`pull of ${registry.image} stopped: it moved less than 1 MiB in ${PULL_STALL_SECONDS} s (the registry stopped sending)`);
      const charges = (await api('GET', '/v1/billing/charges?limit=100')).body.data;
      expect(charges.filter((c: { instance_id: string }) => c.instance_id === body.id)).toEqual([]);
      // Both GPUs are free again for whoever comes next.
      await eventually(async () => {
        const h100 = (await api('GET', '/v1/skus')).body.data.find((s: { id: string }) => s.id === 'h100-80gb');
        return h100.pools[0].free_gpus === 2 ? true : undefined;
      }, 10_000, 'the GPU to be free');
    } finally {
      await registry.close();
    }
  }, 90_000);

  it('answers 409 no_capacity when the GPUs run out, and two concurrent creates never share the last GPU', async () => {
    const first = await create({ image: SLEEPER_IMAGE });
    expect(first.status).toBe(201);
    const [a, b] = await Promise.all([create({ image: SLEEPER_IMAGE }), create({ image: SLEEPER_IMAGE })]);
    expect([a.status, b.status].sort()).toEqual([201, 409]);
    const loser = a.status === 409 ? a : b;
    expect(loser.body.error.type).toBe('no_capacity');
    expect((await create({ image: SLEEPER_IMAGE })).status).toBe(409);
    const winner = a.status === 201 ? a : b;
    for (const id of [first.body.id, winner.body.id]) await waitFor(id, ['ready']);
    const claimed = await cp.store.instances.claimedGpuUuids();
    expect(claimed.size).toBe(2);
    for (const id of [first.body.id, winner.body.id]) await api('POST', `/v1/instances/${id}/terminate`, { force: true });
    for (const id of [first.body.id, winner.body.id]) await waitFor(id, ['terminated']);
  }, 90_000);

  it('keeps a running container across an agent crash and re-adopts it', async () => {
    const { body } = await create({ image: SLEEPER_IMAGE });
    await waitFor(body.id, ['ready']);
    agent.child.kill('SIGKILL');
    await agent.exited;
    expect((await containersOf(body.id))[0]!.State).toBe('running');

    agent = startAgent('');
    await eventually(() => cp.gateway.session(nodeId) !== undefined, 20_000, 'the agent to reconnect');
    // Still ready, and the re-adopted container can be stopped through the API.
    expect((await read(body.id)).status).toBe('ready');
    await api('POST', `/v1/instances/${body.id}/terminate`);
    await waitFor(body.id, ['terminated']);
    expect(await containersOf(body.id)).toEqual([]);
  }, 60_000);
});
