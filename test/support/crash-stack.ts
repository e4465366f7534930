// A control plane that can crash: the control plane as a child process (see
// control-plane-process.ts) on a data dir that outlives it, one real agent with GPUs
// from the fake NVML, and an API key made before the first start. `restart` SIGKILLs
// the control plane and starts another on the same data and gRPC port; the agent
// reconnects as the same node.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import Docker from 'dockerode';
import { buildServices } from '../../control-plane/src/app.js';
import { loadControlPlaneConfig } from '../../control-plane/src/config.js';
import { DATABASE_FILE, openSqliteStore } from '../../control-plane/src/store/sqlite/sqlite-store.js';
import { spawnControlPlane, type ControlPlaneProcess } from './control-plane-process.js';
import { fakeGpuNode } from './fake-gpu-node.js';
import { eventually, freePort, removeNodeContainers, type AgentProcess } from './node-agent-process.js';

export interface CrashStack {
  dir: string;
  dataDir: string;
  cp: ControlPlaneProcess;
  agent: AgentProcess;
  nodeId: string;
  key: string;
  docker: Docker;
  /** `fetch` against the current control plane with the key; the JSON body parsed. */
  api(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<{ status: number; body: any; headers: Headers }>;
  /**
   * SIGKILLs the control plane and starts a new one on the same data dir; resolves once the
   * agent is back. `downMs`: how long nothing listens in between; `whileAgentAway` runs as
   * soon as the new control plane listens, before the agent is waited for.
   */
  restart(env?: Record<string, string>, options?: { downMs?: number; whileAgentAway?: () => Promise<void> }): Promise<void>;
  /** The instance containers of this node on Docker, by instance id (label svc.instance), with their state. */
  containers(): Promise<Map<string, string>>;
  close(): Promise<void>;
}

export async function startCrashStack(options: { name: string; gpus: number; env?: Record<string, string>; agentEnv?: Record<string, string> }): Promise<CrashStack> {
  const dir = mkdtempSync(join(tmpdir(), `${options.name}-`));
  const dataDir = join(dir, 'cp');
  const docker = new Docker();
  const node = await fakeGpuNode(dir, options.name, options.gpus);
  const grpcPort = await freePort();
  const env = {
    SVC_DATA_DIR: dataDir,
    SVC_GRPC_PORT: String(grpcPort),
    // One address across restarts: clients retry the same URL, as they would behind a load balancer.
    SVC_HTTP_PORT: String(await freePort()),
    SVC_REPORT_INTERVAL_MS: '500',
    // Long enough that a restart of the control plane does not count as a lost node.
    SVC_NODE_DEADLINE_MS: '60000',
    SVC_TERMINATION_GRACE_MS: '2000',
    ...options.env,
  };

  // The key and the node's enrollment token, written the way svcctl writes them.
  const store = openSqliteStore(dataDir);
  let key: string;
  let token: string;
  try {
    const services = buildServices({ config: loadControlPlaneConfig({ ...process.env, ...env }), store });
    const { org } = await services.orgs.ensureDefaultOrg();
    key = (await services.keys.create({ orgId: org.id, scopes: ['compute:write', 'compute:read', 'billing:read'] })).value;
    token = (await services.enrollment.createToken()).value;
  } finally {
    await store.close();
  }

  const cp = await spawnControlPlane(env);
  const agent = node.spawn(grpcPort, token, options.agentEnv);
  const processes: ControlPlaneProcess[] = [cp];

  const stack: CrashStack = {
    dir,
    dataDir,
    cp,
    agent,
    nodeId: '',
    key,
    docker,
    api: async (method, path, body, headers = {}) => {
      const res = await fetch(stack.cp.baseUrl + path, {
        method,
        headers: { authorization: `Bearer ${key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined, headers: res.headers };
    },
    restart: async (restartEnv = {}, restartOptions = {}) => {
      await stack.cp.kill();
      const since = Date.now();
      if (restartOptions.downMs) await new Promise((r) => setTimeout(r, restartOptions.downMs));
      stack.cp = await spawnControlPlane({ ...env, ...restartEnv });
      processes.push(stack.cp);
      await restartOptions.whileAgentAway?.();
      await nodeReady(since);
    },
    containers: async () => {
      const found = await docker.listContainers({ all: true, filters: { label: [`svc.node=${stack.nodeId}`, 'svc.instance'] } });
      return new Map(found.map((c) => [c.Labels['svc.instance']!, c.State]));
    },
    close: async () => {
      for (const p of processes) await p.kill();
      if (agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
      await agent.exited;
      if (stack.nodeId) await removeNodeContainers(docker, stack.nodeId);
      rmSync(dir, { recursive: true, force: true });
    },
  };

  /** The node's session with the current control plane began after `since` (read from the data dir, as svcctl would). */
  const nodeReady = (since = 0, freeGpus?: number) =>
    eventually(
      async () => {
        const db = new Database(join(dataDir, DATABASE_FILE), { readonly: true });
        try {
          const node = db.prepare(`SELECT id, connected_at FROM nodes WHERE status = 'ready'`).get() as { id: string; connected_at: number | null } | undefined;
          if (!node || node.connected_at === null || node.connected_at < since) return undefined;
          stack.nodeId = node.id;
        } finally {
          db.close();
        }
        if (freeGpus === undefined) return true;
        const skus = await stack.api('GET', '/v1/skus');
        return skus.body.data.find((s: { id: string }) => s.id === 'h100-80gb')?.pools.some((p: { free_gpus: number }) => p.free_gpus === freeGpus) ? true : undefined;
      },
      60_000,
      'the agent to be connected to the control plane',
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}\n--- control plane ---\n${stack.cp.output().slice(-3000)}\n--- agent ---\n${agent.output().slice(-3000)}`);
    });
  await nodeReady(0, options.gpus);
  return stack;
}
