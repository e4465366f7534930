// Section: instance start and stop latency on the real stack: the control plane (in this
// process), a real agent process with 8 GPUs from the fake libnvidia-ml, the real Docker
// engine, a warm image from the loopback registry. Measures create -> ready and
// force-terminate -> terminated over 20 instances, one at a time, as a user sees them
// (status changes observed on the store every 2 ms).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { buildFakeNvml, FakeNvmlStateFile } from 'node-nvml-bindings';
import { defaultControlPlaneConfig } from '../../control-plane/src/config.js';
import { startControlPlane } from '../../control-plane/src/server.js';
import { SLEEPER_IMAGE } from '../../test/support/images.js';
import { eventually, freePort, spawnAgent } from '../../test/support/node-agent-process.js';
import { percentile, table } from './format.js';
import type { Section, SectionReport } from './section.js';

const RUNS = 20;
const TARGET_READY_P50_MS = 1500;
const TARGET_TERMINATE_P50_MS = 1000;

async function pull(docker: Docker, image: string): Promise<void> {
  const stream = await docker.pull(image);
  await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve())));
}

export const instancesSection: Section = {
  title: 'Instance start and stop (real agent, Docker, warm image)',
  async run(): Promise<SectionReport> {
    const dir = mkdtempSync(join(tmpdir(), 'bench-instances-'));
    const docker = new Docker();
    await pull(docker, SLEEPER_IMAGE);
    const state = new FakeNvmlStateFile(join(dir, 'gpus.state'), { gpus: Array.from({ length: 8 }, () => ({})) });
    const cp = await startControlPlane(
      defaultControlPlaneConfig({ dataDir: join(dir, 'cp'), httpPort: 0, grpcPort: await freePort(), reportIntervalMs: 1000, logLevel: 'warn' }),
    );
    const agent = spawnAgent({
      SVC_CONTROL_PLANE: `127.0.0.1:${cp.grpcPort}`,
      SVC_AGENT_DATA_DIR: join(dir, 'agent'),
      SVC_NVML_LIBRARY: await buildFakeNvml(),
      SVC_NODE_TOKEN: (await cp.app.services.enrollment.createToken()).value,
      SVC_LOG_LEVEL: 'warn',
      ...state.env(),
    });
    let nodeId = '';
    try {
      const { org } = await cp.app.services.orgs.ensureDefaultOrg();
      const key = (await cp.app.services.keys.create({ orgId: org.id, scopes: ['compute:write', 'compute:read'] })).value;
      const call = async (method: string, path: string, body?: unknown) => {
        const res = await fetch(cp.baseUrl + path, {
          method,
          headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
          body: body ? JSON.stringify(body) : undefined,
        });
        return (await res.json()) as { id: string; status: string; error?: { message: string } };
      };
      const node = await eventually(async () => {
        const [first] = await cp.app.services.nodes.candidates();
        return first?.gpus.length === 8 ? first : undefined;
      }, 30_000, 'the agent to register');
      nodeId = node.id;
      const statusOf = async (id: string) => (await cp.store.instances.get(id))!.status;
      const until = async (id: string, status: string) => {
        await eventually(async () => (await statusOf(id)) === status || ((await statusOf(id)) === 'failed' && Promise.reject(new Error(`instance ${id} failed`))), 30_000, `${id} ${status}`, 2);
      };

      const ready: number[] = [];
      const terminated: number[] = [];
      for (let i = 0; i < RUNS; i++) {
        const t0 = performance.now();
        const created = await call('POST', '/v1/instances', { sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE });
        if (!created.id) throw new Error(`create failed: ${created.error?.message}`);
        await until(created.id, 'ready');
        ready.push(performance.now() - t0);
        const t1 = performance.now();
        await call('POST', `/v1/instances/${created.id}/terminate`, { force: true });
        await until(created.id, 'terminated');
        terminated.push(performance.now() - t1);
      }

      const row = (name: string, values: number[], target: number) => [
        name,
        `${percentile(values, 50).toFixed(0)} ms`,
        `${percentile(values, 95).toFixed(0)} ms`,
        `${Math.max(...values).toFixed(0)} ms`,
        `p50 < ${target} ms`,
        percentile(values, 50) < target ? 'PASS' : 'MISS',
      ];
      const rows = [row('create -> ready', ready, TARGET_READY_P50_MS), row('force-terminate -> terminated', terminated, TARGET_TERMINATE_P50_MS)];
      const pass = rows.every((r) => r[5] === 'PASS');
      return {
        verdict: pass ? 'PASS' : 'MISS',
        summary: `create->ready p50 ${rows[0]![1]}, force-terminate p50 ${rows[1]![1]} (targets < ${TARGET_READY_P50_MS} ms, < ${TARGET_TERMINATE_P50_MS} ms)`,
        details: [
          `${RUNS} instances, one at a time: 1 x h100-80gb (fake NVML GPU), image ${SLEEPER_IMAGE} already on the host.`,
          '',
          ...table(['measure', 'p50', 'p95', 'max', 'target', 'verdict'], rows),
        ],
      };
    } finally {
      agent.child.kill('SIGTERM');
      await agent.exited;
      await cp.app.close();
      // Force-terminated instances leave nothing behind; a failed run might.
      for (const c of await docker.listContainers({ all: true, filters: { label: [`svc.node=${nodeId}`] } })) {
        await docker.getContainer(c.Id).remove({ force: true });
      }
      rmSync(dir, { recursive: true, force: true });
    }
  },
};
