// A real control plane with desired model-server replicas and one real agent process
// (no GPUs) running them from the CPU engine image: the base of the inference suites.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../../control-plane/src/config.js';
import { startControlPlane } from '../../control-plane/src/server.js';
import { eventually, freePort, removeNodeContainers, spawnAgent, whileAgentStarts, type AgentProcess } from './node-agent-process.js';

export interface ReplicaStack {
  config: ControlPlaneConfig;
  cp: Awaited<ReturnType<typeof startControlPlane>>;
  agent: AgentProcess;
  nodeId: string;
  orgId: string;
  /** Kills the agent and starts it again on its data dir with `env` added; resolves once its node is ready again. */
  restartAgent(env: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export interface ReplicaStackOptions {
  name: string;
  /** SVC_REPLICAS: model:quantization:pool=count, comma-separated. */
  replicas: string;
  /** Replicas the router must see ready before the suite starts. */
  ready: number;
  /** Waits for enrollment and for the replicas; a shared, loaded host wants them generous. */
  enrollTimeoutMs: number;
  readyTimeoutMs: number;
  config?: Partial<ControlPlaneConfig>;
}

export async function startReplicaStack(options: ReplicaStackOptions): Promise<ReplicaStack> {
  const dir = mkdtempSync(join(tmpdir(), `${options.name}-`));
  const docker = new Docker();
  const config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    reportIntervalMs: 500,
    nodeDeadlineMs: 20_000,
    replicas: options.replicas,
    replicaReconcileMs: 200,
    replicaStopGraceMs: 1_000,
    logLevel: 'warn',
    ...options.config,
  });
  const cp = await startControlPlane(config);
  const orgId = (await cp.app.services.orgs.ensureDefaultOrg()).org.id;
  const agentEnv = {
    SVC_CONTROL_PLANE: `127.0.0.1:${config.grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, 'agent'),
    SVC_AGENT_HOSTNAME: options.name,
    SVC_NVML_LIBRARY: join(dir, 'no-nvml.so'),
    SVC_NODE_TOKEN: (await cp.app.services.enrollment.createToken()).value,
    SVC_REPLICA_HEALTH_INTERVAL_MS: '200',
  };
  let agent = spawnAgent(agentEnv);
  let nodeId = '';
  const close = async () => {
    if (agent.child.exitCode === null) agent.child.kill('SIGKILL');
    if (nodeId) await removeNodeContainers(docker, nodeId);
    await cp.app.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    nodeId = await whileAgentStarts(agent, async () => (await cp.app.services.nodes.list())[0]?.node.id, options.enrollTimeoutMs, 'the agent to enroll');
    await eventually(() => cp.app.services.replicaDirectory.ready().length === options.ready, options.readyTimeoutMs, `${options.ready} replicas running`);
  } catch (err) {
    await close();
    throw err;
  }
  const stack: ReplicaStack = {
    config,
    cp,
    agent,
    nodeId,
    orgId,
    close,
    restartAgent: async (env) => {
      agent.child.kill('SIGKILL');
      await agent.exited;
      agent = spawnAgent({ ...agentEnv, ...env });
      stack.agent = agent;
      await whileAgentStarts(agent, async () => (cp.gateway.session(nodeId) !== undefined ? true : undefined), options.enrollTimeoutMs, 'the agent to reconnect');
    },
  };
  return stack;
}
