// End to end: operators' GPU metrics. A real control plane (SQLite, gRPC gateway) and a
// real node agent process with 8 GPUs from the fake libnvidia-ml; the operators' listener
// must carry every dcgm-exporter series for every GPU with dcgm-exporter's labels (and
// ours: node, pool, and the instance on the GPU with its org, from a real instance in a
// Docker container), the public API port none of them, and `promtool check metrics` must
// parse the exposition.
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import Docker from 'dockerode';
import { buildFakeNvml, FakeNvmlStateFile } from 'node-nvml-bindings';
import { defaultControlPlaneConfig, type ControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { eventually, freePort, removeNodeContainers, spawnAgent, type AgentProcess } from './support/node-agent-process.js';

const GPU_COUNT = 8;
const HOSTNAME = 'dcgm-host';
const MODEL = 'NVIDIA H100 80GB HBM3';
const SERIES = [
  'DCGM_FI_DEV_GPU_UTIL',
  'DCGM_FI_DEV_FB_USED',
  'DCGM_FI_DEV_FB_FREE',
  'DCGM_FI_DEV_GPU_TEMP',
  'DCGM_FI_DEV_POWER_USAGE',
  'DCGM_FI_DEV_SM_CLOCK',
  'DCGM_FI_DEV_MEM_CLOCK',
  'DCGM_FI_DEV_XID_ERRORS',
  'DCGM_FI_DEV_ECC_SBE_VOL_TOTAL',
  'DCGM_FI_DEV_ECC_DBE_VOL_TOTAL',
];
const uuid = (i: number) => `GPU-dc9e0000-0000-4000-8000-00000000000${i}`;

const dir = mkdtempSync(join(tmpdir(), 'gpu-metrics-e2e-'));
let config: ControlPlaneConfig;
let cp: Awaited<ReturnType<typeof startControlPlane>>;
let gpuState: FakeNvmlStateFile;
let agent: AgentProcess | undefined;
let nodeId: string;
/** The instance running on one of the GPUs: its id, org and GPU UUID. */
let running: { id: string; orgId: string; gpuUuid: string };

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Parses the exposition's sample lines (label values here hold no escaped quotes). */
function samples(text: string): Sample[] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((line) => {
      const m = /^(\w+)\{(.*)\} (\S+)$/.exec(line);
      if (!m) throw new Error(`unparsed line: ${line}`);
      const labels = Object.fromEntries([...m[2]!.matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
      return { name: m[1]!, labels, value: Number(m[3]) };
    });
}

async function scrape(): Promise<string> {
  const res = await fetch(cp.operatorMetricsUrl!);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}

beforeAll(async () => {
  const libraryPath = await buildFakeNvml();
  gpuState = new FakeNvmlStateFile(join(dir, 'gpus.state'), {
    gpus: Array.from({ length: GPU_COUNT }, (_, i) => ({
      uuid: uuid(i),
      utilizationGpuPercent: 10 * i,
      eccCorrectedVolatile: i,
      eccUncorrectedVolatile: 0,
    })),
  });
  config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    operatorMetricsPort: await freePort(),
    reportIntervalMs: 500,
    logLevel: 'warn',
  });
  cp = await startControlPlane(config);
  const token = (await cp.app.services.enrollment.createToken()).value;
  agent = spawnAgent({
    SVC_CONTROL_PLANE: `127.0.0.1:${config.grpcPort}`,
    SVC_AGENT_DATA_DIR: join(dir, 'agent'),
    SVC_AGENT_HOSTNAME: HOSTNAME,
    SVC_NVML_LIBRARY: libraryPath,
    SVC_NODE_TOKEN: token,
    SVC_PUBLIC_HOST: '127.0.0.1',
    ...gpuState.env(),
  });
  const detail = await eventually(async () => {
    const d = await cp.app.services.nodes.show(HOSTNAME);
    return d.node.status === 'ready' && d.gpus.length === GPU_COUNT && d.gpus.every((g) => g.sample !== null) ? d : undefined;
  }, 30_000, 'the node ready with 8 sampled GPUs');
  nodeId = detail.node.id;

  // A customer's instance on one GPU (a real container), so one GPU's series name it.
  const { org } = await cp.app.services.orgs.ensureDefaultOrg();
  const key = (await cp.app.services.keys.create({ orgId: org.id, scopes: ['compute:write', 'compute:read'] })).value;
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const created = await fetch(`${cp.baseUrl}/v1/instances`, { method: 'POST', headers, body: JSON.stringify({ sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE }) });
  const instance = (await created.json()) as { id: string };
  expect(created.status, JSON.stringify(instance)).toBe(201);
  await eventually(async () => {
    const res = await fetch(`${cp.baseUrl}/v1/instances/${instance.id}`, { headers });
    const body = (await res.json()) as { status: string; failure_reason?: string };
    if (body.status === 'failed') throw new Error(`the instance failed: ${body.failure_reason}`);
    return body.status === 'ready' ? true : undefined;
  }, 60_000, 'the instance to be ready');
  // Tenants are not told GPU UUIDs; the operator's store is.
  running = { id: instance.id, orgId: org.id, gpuUuid: (await cp.store.instances.get(instance.id))!.gpuUuids[0]! };
}, 120_000);

afterAll(async () => {
  if (agent && agent.child.exitCode === null) agent.child.kill('SIGKILL');
  if (nodeId) await removeNodeContainers(new Docker(), nodeId);
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("operators' GPU metrics (dcgm-exporter names and labels)", () => {
  it('carries every DCGM series for every GPU of an 8-GPU node, labelled as dcgm-exporter labels them', async () => {
    const text = await scrape();
    const all = samples(text);
    for (const name of SERIES) {
      const rows = all.filter((s) => s.name === name);
      expect(rows.map((r) => r.labels.gpu), name).toEqual(Array.from({ length: GPU_COUNT }, (_, i) => String(i)));
      for (const row of rows) {
        const i = Number(row.labels.gpu);
        const held = uuid(i) === running.gpuUuid;
        expect(row.labels, `${name} gpu ${i}`).toEqual({
          gpu: String(i),
          UUID: uuid(i),
          device: `nvidia${i}`,
          modelName: MODEL,
          Hostname: HOSTNAME,
          node: nodeId,
          pool: 'na',
          instance: held ? running.id : '',
          org: held ? running.orgId : '',
        });
        expect(Number.isFinite(row.value)).toBe(true);
      }
    }
    // dcgm-exporter's types and HELP texts, which dashboards and recording rules rely on.
    expect(text).toContain('# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge');
    expect(text).toContain('# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge');
    expect(text).toContain('# TYPE DCGM_FI_DEV_ECC_SBE_VOL_TOTAL counter');
    expect(text).toContain('# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n# TYPE DCGM_FI_DEV_XID_ERRORS gauge');

    const value = (name: string, gpu: number) => all.find((s) => s.name === name && s.labels.gpu === String(gpu))?.value;
    expect(value('DCGM_FI_DEV_GPU_UTIL', 3)).toBe(30);
    expect(value('DCGM_FI_DEV_ECC_SBE_VOL_TOTAL', 5)).toBe(5);
    expect(value('DCGM_FI_DEV_XID_ERRORS', 0)).toBe(0);
    // Used + free is the 80 GB of an H100, in MiB.
    expect(value('DCGM_FI_DEV_FB_USED', 0)! + value('DCGM_FI_DEV_FB_FREE', 0)!).toBeGreaterThan(75_000);
  });

  it('names the instance on a busy GPU and its org; an idle GPU has the same labels, empty', async () => {
    const all = samples(await scrape());
    const util = (gpuUuid: string) => all.find((s) => s.name === 'DCGM_FI_DEV_GPU_UTIL' && s.labels.UUID === gpuUuid)!.labels;
    expect(running.id).toMatch(/^inst_/);
    expect(util(running.gpuUuid)).toMatchObject({ instance: running.id, org: running.orgId });
    const idle = Array.from({ length: GPU_COUNT }, (_, i) => uuid(i)).find((u) => u !== running.gpuUuid)!;
    expect(util(idle)).toMatchObject({ instance: '', org: '' });
    // Exactly one GPU of the eight is busy, in every series.
    expect(all.filter((s) => s.labels.instance === running.id)).toHaveLength(all.filter((s) => s.labels.UUID === running.gpuUuid).length);
    expect(all.filter((s) => s.labels.UUID !== undefined && s.labels.instance !== '' && s.labels.instance !== running.id)).toEqual([]);
  });

  it('DCGM_FI_DEV_XID_ERRORS is the last XID a GPU reported', async () => {
    gpuState.injectXid(2, 48);
    gpuState.injectXid(6, 13);
    await eventually(async () => {
      const all = samples(await scrape());
      const xid = (gpu: number) => all.find((s) => s.name === 'DCGM_FI_DEV_XID_ERRORS' && s.labels.gpu === String(gpu))?.value;
      return xid(2) === 48 && xid(6) === 13 && xid(1) === 0 ? true : undefined;
    }, 10_000, 'XID 48 on GPU 2 and XID 13 on GPU 6 in the metrics');
  });

  it('promtool parses the exposition; its only remarks are the names dcgm-exporter fixed', async () => {
    const promtool = spawnSync('promtool', ['--version'], { timeout: 60_000 });
    expect(promtool.error, 'promtool is installed by scripts/setup-host.sh (Debian package prometheus)').toBeUndefined();
    const text = await scrape();
    const result = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 60_000 });
    const remarks = `${result.stdout}${result.stderr}`.split('\n').filter((l) => l.trim() !== '');
    // dcgm-exporter's names and labels are what dashboards query; promtool's style lint
    // (lower-case "_total" on counters, snake_case labels) is knowingly not followed.
    // svc_gpu_healthy and svc_node_isolation_warning share the labels so that they join with the DCGM series.
    const allowed = [
      /^DCGM_FI_DEV_ECC_[SD]BE_VOL_TOTAL counter metrics should have "_total" suffix$/,
      /^(DCGM_FI_DEV_\w+|svc_gpu_healthy|svc_node_isolation_warning|svc_node_clock_offset_seconds) label names should be written in 'snake_case' not 'camelCase'$/,
    ];
    for (const remark of remarks) expect(allowed.some((a) => a.test(remark.trim())), remark).toBe(true);
  });

  it('the shipped GPU alert rules pass promtool check rules, and each fires on its scripted fault (promtool test rules)', () => {
    const alerts = new URL('../control-plane/alerts/', import.meta.url).pathname;
    const check = spawnSync('promtool', ['check', 'rules', 'gpu-alerts.yml'], { cwd: alerts, encoding: 'utf8', timeout: 60_000 });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain('SUCCESS: 6 rules found');
    const tests = spawnSync('promtool', ['test', 'rules', 'gpu-alerts.test.yml'], { cwd: alerts, encoding: 'utf8', timeout: 60_000 });
    expect(tests.status, tests.stdout + tests.stderr).toBe(0);
  });

  it("svc_node_isolation_warning names what the node's agent reported: here, dockerd pulls around its pull proxy", async () => {
    // This machine's dockerd has no proxy set (scripts/setup-host.sh), so the agent says so.
    const all = samples(await scrape()).filter((s) => s.name === 'svc_node_isolation_warning');
    expect(all).toContainEqual({ name: 'svc_node_isolation_warning', labels: { Hostname: HOSTNAME, node: nodeId, pool: 'na', warning: 'pulls_bypass_proxy' }, value: 1 });
    // Not on the public port: where isolation is weaker is the operator's to know.
    expect(await (await fetch(`${cp.baseUrl}/metrics`)).text()).not.toContain('isolation');
  });

  it('svc_gpu_healthy, which GpuUnhealthy reads, is 0 for a GPU the agent took out of service', async () => {
    await eventually(async () => {
      const all = samples(await scrape());
      const healthy = (gpu: number) => all.find((s) => s.name === 'svc_gpu_healthy' && s.labels.gpu === String(gpu))?.value;
      return healthy(2) === 0 && healthy(6) === 1 && healthy(0) === 1 ? true : undefined;
    }, 10_000, 'GPU 2 (XID 48) unhealthy, GPU 6 (XID 13) healthy');
  });

  it('is not on the public API port, and the listener answers anything else in the error envelope', async () => {
    const publicMetrics = await fetch(`${cp.baseUrl}/metrics`);
    expect(await publicMetrics.text()).not.toContain('DCGM_FI_');
    const base = cp.operatorMetricsUrl!.replace(/\/metrics$/, '');
    const other = await fetch(`${base}/v1/instances`);
    expect(other.status).toBe(404);
    expect(await other.json()).toMatchObject({ error: { type: 'not_found' } });
    const post = await fetch(`${base}/metrics`, { method: 'POST', body: 'x' });
    expect(post.status).toBe(405);
    expect(await post.json()).toMatchObject({ error: { type: 'method_not_allowed' } });
    expect(new URL(base).hostname).toBe('127.0.0.1');
  });

  it('a node that goes silent stops exporting its GPUs (its series go stale, they do not freeze)', async () => {
    agent!.child.kill('SIGKILL');
    await eventually(async () => ((await cp.app.services.nodes.show(nodeId)).node.status === 'unreachable' ? true : undefined), 15_000, 'the node unreachable');
    expect(await scrape()).not.toContain('DCGM_FI_DEV_GPU_UTIL{');
  });
});
