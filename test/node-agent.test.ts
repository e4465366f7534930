// End to end: the real control plane (HTTP + gRPC gateway + SQLite, in this process) and
// real node agent processes over gRPC on loopback, with the fake libnvidia-ml.so.1 built
// from C and scripted through its state file; operators' views through `svcctl --json`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildFakeNvml, FakeNvmlStateFile } from 'node-nvml-bindings';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { eventually, freePort, spawnAgent, svcctlJson, type AgentProcess } from './support/node-agent-process.js';

const REPORT_INTERVAL_MS = 1000;
const NODE_DEADLINE_MS = 2500;
const GPU_COUNT = 8;

type ControlPlane = Awaited<ReturnType<typeof startControlPlane>>;
interface GpuView { index: number; uuid: string; healthy: boolean; health_reason: string; name: string; temperature_c: number | null }
interface NodeShow {
  id: string;
  status: string;
  hostname: string;
  gpus_total: number;
  gpus_healthy: number;
  host_facts: Record<string, unknown> | null;
  gpus: GpuView[];
  timeline: Array<{ kind: string; gpu_uuid: string | null; xid: number | null; healthy: boolean | null; message: string }>;
}

const dir = mkdtempSync(join(tmpdir(), 'node-agent-e2e-'));
const dataDir = join(dir, 'control-plane');
let config: ControlPlaneConfig;
let cp: ControlPlane;
let libraryPath: string;
let gpuState: FakeNvmlStateFile;
const agents: AgentProcess[] = [];
const uuid = (i: number) => `GPU-e2e00000-0000-4000-8000-00000000000${i}`;

async function createToken(): Promise<string> {
  return (await cp.app.services.enrollment.createToken()).value;
}

function agent(name: string, env: Record<string, string>): AgentProcess {
  const a = spawnAgent({
    SVC_CONTROL_PLANE: `127.0.0.1:${config.grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, name),
    SVC_AGENT_HOSTNAME: name,
    SVC_NVML_LIBRARY: libraryPath,
    ...env,
  });
  agents.push(a);
  return a;
}

const show = (ref: string) => cp.app.services.nodes.show(ref, 50);

beforeAll(async () => {
  libraryPath = await buildFakeNvml();
  gpuState = new FakeNvmlStateFile(join(dir, 'gpus.state'), {
    gpus: Array.from({ length: GPU_COUNT }, (_, i) => ({ uuid: uuid(i), eccUncorrectedVolatile: 0 })),
  });
  config = defaultControlPlaneConfig({
    dataDir,
    httpPort: 0,
    grpcPort: await freePort(),
    reportIntervalMs: REPORT_INTERVAL_MS,
    nodeDeadlineMs: NODE_DEADLINE_MS,
    logLevel: 'warn',
  });
  cp = await startControlPlane(config);
});

afterAll(async () => {
  for (const a of agents) if (a.child.exitCode === null) a.child.kill('SIGKILL');
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('node agent end to end', () => {
  let nodeId: string;

  it('enrolls with a token from svcctl, registers and reports its GPUs and host facts', async () => {
    const { token } = await svcctlJson<{ token: string }>(dataDir, 'nodes', 'token', 'create');
    agent('gpu-a', { SVC_NODE_TOKEN: token, FAKE_NVML_STATE: gpuState.path });
    const detail = await eventually(async () => {
      const d = await show('gpu-a');
      return d.node.status === 'ready' && d.gpus.length === GPU_COUNT ? d : undefined;
    }, 15_000, 'gpu-a ready with its GPUs');
    nodeId = detail.node.id;

    const shown = await svcctlJson<NodeShow>(dataDir, 'nodes', 'show', 'gpu-a');
    expect(shown).toMatchObject({ id: nodeId, status: 'ready', gpus_total: GPU_COUNT, gpus_healthy: GPU_COUNT });
    expect(shown.gpus.map((g) => g.uuid)).toEqual(Array.from({ length: GPU_COUNT }, (_, i) => uuid(i)));
    expect(shown.gpus[0]).toMatchObject({ name: 'NVIDIA H100 80GB HBM3', healthy: true });
    expect(shown.host_facts).toMatchObject({ hostname: 'gpu-a', nvml_available: true, nvidia_driver_version: '550.54.15', cuda_version: '12.4', agent_version: '0.1.0' });
    expect(shown.host_facts!.cpu_cores).toBeGreaterThan(0);
    expect(shown.host_facts!.kernel).not.toBe('');
  });

  it('telemetry keeps arriving: a temperature change shows up', async () => {
    gpuState.updateGpu(5, { temperatureC: 66 });
    await eventually(async () => (await show('gpu-a')).gpus.find((g) => g.uuid === uuid(5))?.sample?.temperature_c === 66, 3 * REPORT_INTERVAL_MS, 'the new temperature');
  });

  it('XID 79 makes the GPU unhealthy within one report interval; XID 13 changes nothing but the timeline; an operator reset clears it', async () => {
    gpuState.injectXid(0, 13);
    gpuState.injectXid(2, 79);
    const injected = Date.now();
    // The health event is pushed at once and lands in the timeline long before the next report…
    await eventually(async () => (await show(nodeId)).timeline.some((e) => e.kind === 'xid' && e.gpuUuid === uuid(2)), REPORT_INTERVAL_MS / 2, 'the XID 79 event in the timeline');
    // …and the GPU's row says unhealthy within one report interval (the registry's flush).
    await eventually(async () => {
      const d = await show(nodeId);
      return d.gpus.find((g) => g.uuid === uuid(2))?.healthy === false;
    }, REPORT_INTERVAL_MS + 250, 'GPU 2 unhealthy in the registry');
    expect(Date.now() - injected).toBeLessThanOrEqual(REPORT_INTERVAL_MS + 250); // + the polling's own slack

    const shown = await svcctlJson<NodeShow>(dataDir, 'nodes', 'show', nodeId);
    const gpu2 = shown.gpus.find((g) => g.uuid === uuid(2))!;
    expect(gpu2.healthy).toBe(false);
    expect(gpu2.health_reason).toMatch(/XID 79/);
    expect(shown.gpus.filter((g) => !g.healthy).map((g) => g.uuid)).toEqual([uuid(2)]); // XID 13 on GPU 0: the application's fault
    expect(shown.timeline).toContainEqual(
      expect.objectContaining({ kind: 'xid', gpu_uuid: uuid(0), xid: 13, healthy: true, recommended_action: 'RESTART_APP' }),
    );
    expect(shown.timeline).toContainEqual(
      expect.objectContaining({ kind: 'xid', gpu_uuid: uuid(2), xid: 79, healthy: false, recommended_action: 'RESTART_BM' }),
    );

    const reset = await svcctlJson<{ state: string }>(dataDir, 'nodes', 'gpu', 'reset-health', nodeId, uuid(2));
    expect(reset.state).toBe('succeeded');
    await eventually(async () => (await show(nodeId)).gpus.every((g) => g.healthy), 2 * REPORT_INTERVAL_MS, 'every GPU healthy again');
    const after = await show(nodeId);
    expect(after.timeline.map((e) => e.kind)).toContain('recovered');
  });

  it('new uncorrectable ECC errors make a GPU unhealthy, and a GPU reset (counters zeroed) makes it healthy', async () => {
    gpuState.updateGpu(3, { eccUncorrectedVolatile: 2 });
    await eventually(async () => (await show(nodeId)).gpus.find((g) => g.uuid === uuid(3))?.healthy === false, 3 * REPORT_INTERVAL_MS, 'GPU 3 unhealthy (ECC)');
    gpuState.updateGpu(3, { eccUncorrectedVolatile: 0 });
    await eventually(async () => (await show(nodeId)).gpus.find((g) => g.uuid === uuid(3))?.healthy === true, 3 * REPORT_INTERVAL_MS, 'GPU 3 healthy after the reset');
  });

  it('a GPU that fell off the bus (XID 79, unreadable) is healthy again once a reset brings it back', async () => {
    gpuState.injectXid(4, 79);
    const gpu4 = async () => (await show(nodeId)).gpus.find((g) => g.uuid === uuid(4));
    await eventually(async () => (await gpu4())?.healthy === false, 2 * REPORT_INTERVAL_MS, 'GPU 4 unhealthy (XID 79)');
    gpuState.updateGpu(4, { errors: { uuid: 15 } }); // NVML_ERROR_GPU_IS_LOST
    await eventually(async () => (await gpu4())?.healthReason.startsWith('unreadable: '), 3 * REPORT_INTERVAL_MS, 'GPU 4 reported unreadable');
    gpuState.updateGpu(4, { errors: {} }); // the reset: NVML reads it again
    await eventually(async () => (await gpu4())?.healthy === true, 3 * REPORT_INTERVAL_MS, 'GPU 4 healthy after the reset');
    expect((await show(nodeId)).timeline[0]).toMatchObject({ kind: 'recovered', gpuUuid: uuid(4), message: 'GPU readable again after a reset' });
  });

  it('after a control plane restart the agent re-registers by itself under the same node id', async () => {
    await cp.app.close();
    const restartedAt = Date.now();
    cp = await startControlPlane(config);
    const detail = await eventually(async () => {
      const d = await show('gpu-a');
      return d.node.status === 'ready' && (d.node.connectedAt ?? 0) >= restartedAt ? d : undefined;
    }, 15_000, 'gpu-a connected again');
    expect(detail.node.id).toBe(nodeId);
    expect((await cp.app.services.nodes.list()).filter((n) => n.node.hostname === 'gpu-a')).toHaveLength(1);
  });

  it('an agent killed with SIGKILL becomes unreachable after the deadline', async () => {
    const a = agents[0]!;
    a.child.kill('SIGKILL');
    const killedAt = Date.now();
    await a.exited;
    await eventually(async () => (await show(nodeId)).node.status === 'unreachable', NODE_DEADLINE_MS + 3 * REPORT_INTERVAL_MS, 'gpu-a unreachable');
    expect(Date.now() - killedAt).toBeGreaterThanOrEqual(NODE_DEADLINE_MS - REPORT_INTERVAL_MS);
  });

  it('a bad token is refused: the agent exits non-zero with the control plane message', async () => {
    const a = agent('gpu-bad', { SVC_NODE_TOKEN: 'svc_nt_not-a-real-token' });
    expect(await a.exited).toBe(3);
    expect(a.output()).toMatch(/enrollment refused: .*\(UNAUTHENTICATED\)/);
  });

  it('without the NVML library the node reports zero GPUs and why, and stops cleanly on SIGTERM', async () => {
    const a = agent('cpu-only', { SVC_NODE_TOKEN: await createToken(), SVC_NVML_LIBRARY: join(dir, 'missing', 'libnvidia-ml.so.1') });
    const detail = await eventually(async () => {
      const d = await show('cpu-only');
      return d.node.status === 'ready' && d.node.hostFacts ? d : undefined;
    }, 15_000, 'cpu-only ready with host facts');
    expect(detail.gpus).toEqual([]);
    expect(detail.node.hostFacts).toMatchObject({ nvml_available: false, nvidia_driver_version: '' });
    expect(String(detail.node.hostFacts!.nvml_unavailable_reason)).toMatch(/missing\/libnvidia-ml\.so\.1/);
    a.child.kill('SIGTERM');
    expect(await a.exited).toBe(0);
  });
});
