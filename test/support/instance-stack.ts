// A whole instance stack for end-to-end suites: a real control plane (HTTP API + agent
// gateway, SQLite in a temp dir), one real agent process with GPUs from the fake NVML,
// an API key, and helpers to create, read and wait for instances over HTTP.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../../control-plane/src/config.js';
import type { FakeNvmlStateFile } from 'node-nvml-bindings';
import { startControlPlane } from '../../control-plane/src/server.js';
import { fakeGpuNode } from './fake-gpu-node.js';
import { eventually, freePort, removeNodeContainers, type AgentProcess } from './node-agent-process.js';

export interface ApiAnswer {
  status: number;
  body: any;
}

export interface InstanceStack {
  dir: string;
  cp: Awaited<ReturnType<typeof startControlPlane>>;
  nodeId: string;
  agent: AgentProcess;
  /** The fake NVML's state: script XIDs, ECC and temperatures. */
  gpuState: FakeNvmlStateFile;
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>;
  create(body: Record<string, unknown>): Promise<ApiAnswer>;
  read(id: string): Promise<any>;
  waitFor(id: string, statuses: string[], ms?: number): Promise<any>;
  /** Kills the agent (as a crash would) and starts a new one on the same data dir; resolves once it is back. */
  restartAgent(): Promise<void>;
  close(): Promise<void>;
}

export async function startInstanceStack(options: {
  name: string;
  gpus: number;
  graceMs?: number;
  agentEnv?: Record<string, string>;
  skuCatalog?: string;
  config?: Partial<ControlPlaneConfig>;
  registerMs?: number;
  /** Ready once the node's GPUs are listed, free or not (a node that takes no work). Default: once they are free to rent. */
  gpusListedOnly?: boolean;
}): Promise<InstanceStack> {
  const dir = mkdtempSync(join(tmpdir(), `${options.name}-`));
  const docker = new Docker();
  const node = await fakeGpuNode(dir, options.name, options.gpus);
  const config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    reportIntervalMs: 500,
    nodeDeadlineMs: 2_000,
    terminationGraceMs: options.graceMs ?? 2_000,
    logLevel: 'warn',
    // Suites' webhook receivers listen on loopback: an operator exception to the SSRF policy.
    webhookAllowedTargets: ['127.0.0.1'],
    ...(options.skuCatalog ? { skuCatalog: options.skuCatalog } : {}),
    ...options.config,
  });
  const cp = await startControlPlane(config);
  const { org } = await cp.app.services.orgs.ensureDefaultOrg();
  const key = (await cp.app.services.keys.create({ orgId: org.id, scopes: ['compute:write', 'compute:read'] })).value;
  const agents: AgentProcess[] = [];
  const spawn = (token: string): AgentProcess => {
    const a = node.spawn(config.grpcPort, token, options.agentEnv);
    agents.push(a);
    return a;
  };

  const api = async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
    const res = await fetch(cp.baseUrl + path, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    return { status: res.status, body: await res.json() };
  };
  const read = async (id: string) => (await api('GET', `/v1/instances/${id}`)).body;

  const stack: InstanceStack = {
    dir,
    cp,
    nodeId: '',
    gpuState: node.gpuState,
    agent: spawn((await cp.app.services.enrollment.createToken()).value),
    api,
    create: (body) => api('POST', '/v1/instances', { sku: 'h100-80gb', gpus: 1, ...body }),
    read,
    waitFor: (id, statuses, ms = 60_000) =>
      eventually(async () => {
        const inst = await read(id);
        if (inst.status === 'failed' && !statuses.includes('failed')) throw new Error(`instance ${id} failed: ${inst.failure_reason}`);
        return statuses.includes(inst.status) ? inst : undefined;
      }, ms, `instance ${id} to be ${statuses.join(' or ')}`),
    restartAgent: async () => {
      // The old session can outlive its agent by a moment: wait for a new one, not any one.
      const old = cp.gateway.session(stack.nodeId);
      stack.agent.child.kill('SIGKILL');
      await stack.agent.exited;
      stack.agent = spawn('');
      await eventually(() => {
        const session = cp.gateway.session(stack.nodeId);
        return session !== undefined && session !== old;
      }, 20_000, 'the agent to reconnect');
    },
    close: async () => {
      for (const a of agents) if (a.child.exitCode === null && a.child.signalCode === null) a.child.kill('SIGKILL');
      if (stack.nodeId) await removeNodeContainers(docker, stack.nodeId);
      await cp.app.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  await eventually(async () => {
    const nodes = await cp.app.services.nodes.list();
    if (options.gpusListedOnly) return nodes.length === 1 && nodes[0]!.node.status === 'ready' && nodes[0]!.gpus.length === options.gpus ? true : undefined;
    const free = (await api('GET', '/v1/skus')).body.data.find((s: { id: string }) => s.id === 'h100-80gb')?.pools.find((p: { free_gpus: number }) => p.free_gpus === options.gpus);
    return nodes.length === 1 && free ? true : undefined;
  }, options.registerMs ?? 30_000, `the agent to register ${options.gpus} GPUs`).catch((err: unknown) => {
    throw new Error(`${(err as Error).message}\nagent output:\n${stack.agent.output()}`);
  });
  stack.nodeId = (await cp.app.services.nodes.list())[0]!.node.id;
  return stack;
}
