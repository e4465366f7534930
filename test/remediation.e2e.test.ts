// GPU fault remediation end to end: a real control plane, a real agent process on GPUs
// from the fake libnvidia-ml (XIDs scripted through its state file), the fake nvidia-smi
// for resets, real containers for instances, a webhook receiver that verifies every
// delivery with the standardwebhooks package, and `svcctl why` run as a process: remotely
// (--url/--key, an operator key, over the operator API) at every stage, checked against
// the same command on the server's data dir.
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemClock } from '@svc/shared';
import { OperatorKeyService } from '../control-plane/src/operators/operator-key-service.js';
import { WebhookReceiver } from '../control-plane/test/webhooks-support.js';
import type { SqliteStore } from '../control-plane/src/store/sqlite/sqlite-store.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually } from './support/node-agent-process.js';

const ROOT = join(import.meta.dirname, '..');
const GPUS = 4;
const uuid = (i: number) => `GPU-00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`;

let stack: InstanceStack;
let store: SqliteStore;
let tenantA: WebhookReceiver;
let tenantB: WebhookReceiver;
let keyB: string;
let orgAName: string;
let operatorKey: string;
/** The laptop's HOME: no config file, no data dir. */
const laptopHome = mkdtempSync(join(tmpdir(), 'remediation-laptop-'));

const svcctl = async (args: string[], env: NodeJS.ProcessEnv): Promise<string> =>
  (await promisify(execFile)(process.execPath, ['--import', 'tsx', join(ROOT, 'control-plane/src/cli/svcctl.ts'), ...args], { cwd: ROOT, env })).stdout;

/** `svcctl why REF [--json]` from a laptop: over the operator API with an operator key. */
function whyRemote(ref: string, json = false): Promise<string> {
  const { SVC_DATA_DIR: _local, ...env } = process.env;
  return svcctl(['--url', stack.cp.baseUrl, '--key', operatorKey, 'why', ref, ...(json ? ['--json'] : [])], { ...env, HOME: laptopHome });
}

/** `svcctl why REF` on the control-plane host, against the server's data dir. */
const whyLocal = (ref: string): Promise<string> => svcctl(['why', ref], { ...process.env, SVC_DATA_DIR: join(stack.dir, 'cp') });

/** What differs between two reads a moment apart: when the report was made, the node last seen, live temperatures. */
const steady = (text: string): string => text.replace(/\(at [^)]+\)/, '(at X)').replace(/last seen \S+/, 'last seen X').replace(/\d+ °C/g, 'N °C');

/**
 * `svcctl why REF`, remotely and on the data dir at once: the same screen; returns the
 * remote one. The server writes a node's latest GPU readings to the store on a timer, so
 * the data dir may show the previous reading for a moment: read both again until they agree.
 */
async function why(ref: string): Promise<string> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const [remote, local] = await Promise.all([whyRemote(ref), whyLocal(ref)]);
    if (steady(remote) === steady(local) || Date.now() > deadline) {
      expect(steady(remote), `svcctl why ${ref}: remote and local differ`).toBe(steady(local));
      return remote;
    }
  }
}

/** The screen's TIMELINE lines, oldest first, as `kind: text`. */
const timelineOf = (screen: string): string[] =>
  screen
    .slice(screen.indexOf('TIMELINE (newest first)'))
    .split('\n')
    .slice(1)
    .filter((l) => l.trim() !== '')
    .map((l) => l.replace(/^ +\S+ +(gpu \d+|node ) +/, '').replace(/^(\w+) +/, '$1: '))
    .reverse();
/** Whether every pattern matches a line, each after the one before. */
const inOrder = (lines: string[], patterns: RegExp[]): boolean => {
  let at = -1;
  for (const p of patterns) {
    at = lines.findIndex((l, i) => i > at && p.test(l));
    if (at < 0) return false;
  }
  return true;
};

const remediationsOf = (gpu: string) => store.remediations.list({ gpuUuid: gpu, limit: 10 });
const gpuRecord = async (gpu: string) => (await store.nodes.listGpus(stack.nodeId)).find((g) => g.uuid === gpu)!;
/** A healthy GPU no instance or replica holds. */
async function freeGpu(): Promise<{ index: number; uuid: string }> {
  const claimed = new Set((await store.nodes.listClaims()).map((c) => c.gpuUuid));
  const gpu = (await store.nodes.listGpus(stack.nodeId)).sort((a, b) => a.index - b.index).find((g) => g.healthy && !claimed.has(g.uuid));
  if (!gpu) throw new Error('no free healthy GPU left on the node');
  return { index: gpu.index, uuid: gpu.uuid };
}

const healthEvents = (received: WebhookReceiver) => received.requests.filter((r) => r.event.type === 'instance.health');

/** Waits until the remediation has read the timeline up to the newest row, i.e. has decided on everything before it. */
async function remediationCaughtUp(): Promise<void> {
  const newest = (await store.nodes.listHealthEvents(stack.nodeId, 1))[0]?.seq ?? 0;
  await eventually(async () => ((await store.remediations.cursor()) >= newest ? true : undefined), 10_000, 'the remediation to read the timeline');
}

beforeAll(async () => {
  stack = await startInstanceStack({ name: 'remediation', gpus: GPUS, config: { remediationTickMs: 200, webhookPollMs: 100 }, registerMs: 120_000 });
  store = stack.cp.store as SqliteStore;
  const services = stack.cp.app.services;
  const { org } = await services.orgs.ensureDefaultOrg();
  orgAName = org.name;
  tenantA = await WebhookReceiver.start();
  tenantA.secrets = [(await services.webhooks.create({ orgId: org.id, url: tenantA.url, eventTypes: ['instance.health'] })).secret];
  // A second tenant on the same node, subscribed to everything: it must hear nothing of tenant A's GPU.
  const orgB = await services.orgs.create('tenant-b');
  keyB = (await services.keys.create({ orgId: orgB.id, scopes: ['compute:write', 'compute:read'] })).value;
  tenantB = await WebhookReceiver.start();
  tenantB.secrets = [(await services.webhooks.create({ orgId: orgB.id, url: tenantB.url, eventTypes: ['*'] })).secret];
  // The on-call's key: read-only is all `svcctl why` needs.
  operatorKey = (await new OperatorKeyService(stack.cp.store.operators, systemClock).create({ scopes: ['operator:read'], name: 'on-call', createdBy: 'local' })).value;
}, 240_000);

afterAll(async () => {
  rmSync(laptopHome, { recursive: true, force: true });
  await stack?.close();
  await tenantA?.stop();
  await tenantB?.stop();
});

async function readAsB(id: string): Promise<any> {
  const res = await fetch(`${stack.cp.baseUrl}/v1/instances/${id}`, { headers: { authorization: `Bearer ${keyB}` } });
  return res.json();
}

async function createAsB(): Promise<any> {
  const res = await fetch(`${stack.cp.baseUrl}/v1/instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${keyB}`, 'content-type': 'application/json' },
    body: JSON.stringify({ sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE }),
  });
  expect(res.status).toBe(201);
  return res.json();
}

describe('GPU fault remediation', () => {
  it('XID 13 (application-level), even in a loop, changes nothing but the timeline', async () => {
    for (let i = 0; i < 3; i++) stack.gpuState.injectXid(1, 13);
    await eventually(async () => ((await store.nodes.listHealthEvents(stack.nodeId, 20)).some((e) => e.kind === 'xid' && e.xid === 13) ? true : undefined), 10_000, 'XID 13 on the timeline');
    await remediationCaughtUp();
    const timeline = await store.nodes.listHealthEvents(stack.nodeId, 50);
    expect(timeline.filter((e) => e.xid === 13)).toHaveLength(1);
    expect(timeline.filter((e) => e.kind === 'remediation')).toEqual([]);
    expect(await remediationsOf(uuid(1))).toEqual([]);
    expect((await gpuRecord(uuid(1))).healthy).toBe(true);
    expect((await store.nodes.getNode(stack.nodeId))!.cordoned).toBe(false);
    expect(stack.gpuState.path && existsSync(`${stack.gpuState.path}.resets`)).toBe(false);

    // svcctl why: the GPU healthy, no remediation, nothing affected; the XID once, with NVIDIA's meaning.
    const screen = await why(uuid(1));
    expect(screen).toMatch(new RegExp(`^  > \\[1\\] ${uuid(1)}  NVIDIA H100 80GB HBM3  healthy`, 'm'));
    expect(screen).not.toContain('UNHEALTHY');
    expect(screen).toContain('REMEDIATION\n  none\n');
    expect(screen).toContain('AFFECTED WORKLOADS\n  none\n');
    const xids = timelineOf(screen).filter((l) => l.startsWith('xid: '));
    expect(xids).toEqual(['xid: XID 13 graphics engine exception; NVIDIA: restart the application (the GPU is fine) (RESTART_APP)']);
    expect(timelineOf(screen).filter((l) => /^(remediation|reset_requested|recovered): /.test(l))).toEqual([]);
  }, 60_000);

  it('XID 48 drains the GPU, tells only the affected org, waits for its instance, then resets it and returns it', async () => {
    const a = (await stack.create({ image: SLEEPER_IMAGE })).body;
    const b = await createAsB();
    await stack.waitFor(a.id, ['ready']);
    await eventually(async () => ((await readAsB(b.id)).status === 'ready' ? true : undefined), 60_000, "tenant B's instance to be ready");
    // Tenants are not told GPU UUIDs; the operator's store is.
    const gpu = (await store.instances.get(a.id))!.gpuUuids[0]!;
    const index = (await gpuRecord(gpu)).index;
    stack.gpuState.injectXid(index, 48);

    // Drained: unhealthy, so no placement; remediation open and waiting for the instance.
    await eventually(async () => ((await remediationsOf(gpu))[0]?.holders.includes(a.id) ? true : undefined), 15_000, 'the remediation to wait for the instance');
    const [open] = await remediationsOf(gpu);
    expect(open).toMatchObject({ xid: 48, action: 'RESET_GPU', kind: 'reset_gpu', stage: 'waiting_idle' });
    expect((await gpuRecord(gpu)).healthy).toBe(false);

    // instance.health reaches tenant A's webhook, signed (standardwebhooks verified it).
    await eventually(() => (healthEvents(tenantA).length > 0 ? true : undefined), 10_000, 'instance.health at tenant A');
    const [delivered] = healthEvents(tenantA);
    expect(delivered!.verifiedWith).toHaveLength(1);
    expect(delivered!.answered).toBe(200);
    expect(delivered!.event.data).toMatchObject({
      instance_id: a.id,
      node_id: stack.nodeId,
      gpu_uuid: gpu,
      xid: 48,
      meaning: 'XID 48: double-bit ECC error',
      recommended_action: 'RESET_GPU',
      remediation: 'reset_gpu',
    });

    // While the instance holds it, no reset; svcctl why says what is going on.
    expect(existsSync(`${stack.gpuState.path}.resets`)).toBe(false);
    const waiting = await why(a.id);
    expect(waiting).toContain(`NODE ${stack.nodeId}`);
    expect(waiting).toMatch(new RegExp(`> \\[${index}\\] ${gpu} .* UNHEALTHY \\(critical XID 48\\) since \\d{4}-`));
    expect(waiting).toContain('IN PROGRESS: waiting_idle');
    expect(waiting).toContain(`waiting for ${a.id} to release the GPU`);
    expect(waiting).toContain(`instance ${a.id}  ready  org ${orgAName} (`);
    expect(waiting).toContain('XID 48 double-bit ECC error; NVIDIA: reset the GPU (RESET_GPU)');
    expect(waiting).not.toContain(b.id);

    // The tenant ends its instance: the GPU is reset through the agent and comes back.
    expect((await stack.api('POST', `/v1/instances/${a.id}/terminate`)).status).toBeLessThan(300);
    await eventually(async () => ((await remediationsOf(gpu))[0]?.stage === 'closed' ? true : undefined), 30_000, 'the GPU to be reset and returned');
    expect((await remediationsOf(gpu))[0]).toMatchObject({ outcome: 'returned_to_service' });
    expect(readFileSync(`${stack.gpuState.path}.resets`, 'utf8').split('\n')).toContain(gpu);
    expect((await gpuRecord(gpu)).healthy).toBe(true);

    // Every step is on the timeline, in order.
    const steps = (await store.nodes.listHealthEvents(stack.nodeId, 100)).filter((e) => e.gpuUuid === gpu).reverse().map((e) => `${e.kind}: ${e.message}`);
    const at = (pattern: RegExp) => steps.findIndex((s) => pattern.test(s));
    const order = [/^xid: XID 48/, /^remediation: remediation: XID 48.*reset the GPU.*notified 1 org/, /waiting for/, /resetting it/, /^reset_requested: GPU reset sent/, /^recovered: GPU reset/, /back in service/];
    expect(order.map(at).every((i, n, all) => i >= 0 && (n === 0 || i > all[n - 1]!)), steps.join('\n')).toBe(true);

    const done = JSON.parse(await whyRemote(gpu, true));
    expect(done.remediations[0]).toMatchObject({ stage: 'closed', outcome: 'returned_to_service', xid: 48 });
    expect(done.gpus.find((g: { uuid: string }) => g.uuid === gpu)).toMatchObject({ healthy: true, in_question: true });

    // Tenant B, on the same node, heard nothing about tenant A's GPU or instance.
    expect(tenantB.requests.filter((r) => JSON.stringify(r.event).includes(a.id) || r.event.type === 'instance.health')).toEqual([]);
  }, 300_000);

  it('XID 95 on an idle GPU resets it at once and returns it', async () => {
    const { index, uuid: gpu } = await freeGpu();
    const before = existsSync(`${stack.gpuState.path}.resets`) ? readFileSync(`${stack.gpuState.path}.resets`, 'utf8') : '';
    stack.gpuState.injectXid(index, 95);
    await eventually(async () => ((await remediationsOf(gpu)).some((r) => r.xid === 95 && r.stage === 'closed') ? true : undefined), 20_000, 'the idle GPU to be reset');
    expect((await remediationsOf(gpu))[0]).toMatchObject({ xid: 95, kind: 'reset_gpu', outcome: 'returned_to_service', holders: [] });
    expect(readFileSync(`${stack.gpuState.path}.resets`, 'utf8').slice(before.length)).toBe(`${gpu}\n`);

    // svcctl why: back in service, the reset done, each step on the timeline in order.
    const screen = await why(gpu);
    expect(screen).toMatch(new RegExp(`^  > \\[${index}\\] ${gpu}  NVIDIA H100 80GB HBM3  healthy since \\d{4}-`, 'm'));
    expect(screen).not.toContain('IN PROGRESS');
    expect(screen).toMatch(/^  rem_\w+  reset_gpu  done \(returned_to_service\) at \d{4}-\S+  opened \d{4}-/m);
    expect(screen).toContain('    XID 95: uncontained memory error -> reset the GPU (RESET_GPU)\n');
    expect(screen).toContain('AFFECTED WORKLOADS\n  none\n');
    const steps = timelineOf(screen);
    const order = [
      /^xid: XID 95 uncontained memory error; NVIDIA: reset the GPU \(RESET_GPU\)$/,
      /^remediation: remediation: XID 95.*reset the GPU/,
      /resetting it/,
      /^reset_requested: GPU reset sent/,
      /^recovered: GPU reset/,
      /back in service/,
    ];
    expect(inOrder(steps, order), steps.join('\n')).toBe(true);
  }, 120_000);

  it('a reset that fails leaves the GPU drained for an operator', async () => {
    const { index, uuid: gpu } = await freeGpu();
    writeFileSync(`${stack.gpuState.path}.reset-fail`, `${gpu}\n`);
    stack.gpuState.injectXid(index, 64);
    await eventually(async () => ((await remediationsOf(gpu)).some((r) => r.xid === 64 && r.stage === 'held') ? true : undefined), 20_000, 'the failed reset to hold the GPU');
    expect((await remediationsOf(gpu))[0]!.detail).toMatch(/the reset did not bring the GPU back: .*in use by another process/);
    expect((await gpuRecord(gpu)).healthy).toBe(false);
    // An operator clears it (svcctl nodes gpu reset-health): the remediation closes.
    await stack.cp.app.services.nodes.requestGpuHealthReset(stack.nodeId, gpu);
    await eventually(async () => ((await remediationsOf(gpu))[0]?.stage === 'closed' ? true : undefined), 20_000, 'the operator reset to close it');
    expect((await remediationsOf(gpu))[0]).toMatchObject({ outcome: 'recovered' });
  }, 120_000);

  it('XID 79 cordons and drains the node and tells every org on it', async () => {
    const b = await createAsB();
    await eventually(async () => ((await readAsB(b.id)).status === 'ready' ? true : undefined), 60_000, "tenant B's instance to be ready");
    const gpu = (await stack.api('GET', '/v1/instances')).body; // tenant A sees only its own instances
    expect(JSON.stringify(gpu)).not.toContain(b.id);
    const faulty = (await freeGpu()).index;
    stack.gpuState.injectXid(faulty, 79);
    await eventually(async () => ((await store.nodes.getNode(stack.nodeId))!.draining ? true : undefined), 15_000, 'the node to be drained');
    const node = (await store.nodes.getNode(stack.nodeId))!;
    expect(node).toMatchObject({ cordoned: true, draining: true });
    expect((await remediationsOf(uuid(faulty)))[0]).toMatchObject({ xid: 79, action: 'RESTART_BM', kind: 'reboot_node', stage: 'node_drained' });
    // The node will be rebooted: tenant B's instance on another GPU of it is affected too.
    await eventually(() => (healthEvents(tenantB).length > 0 ? true : undefined), 10_000, 'instance.health at tenant B');
    await eventually(() => (healthEvents(tenantB).some((r) => r.event.data.instance_id === b.id) ? true : undefined), 10_000, `instance.health for ${b.id}`);
    const listed = (await (await fetch(`${stack.cp.baseUrl}/v1/instances`, { headers: { authorization: `Bearer ${keyB}` } })).json()) as { data: Array<{ id: string }> };
    const mine = new Set(listed.data.map((i) => i.id));
    for (const received of healthEvents(tenantB)) {
      expect(received.verifiedWith).toHaveLength(1);
      expect(mine.has(received.event.data.instance_id)).toBe(true);
      expect(received.event.data).toMatchObject({ xid: 79, recommended_action: 'RESTART_BM', remediation: 'reboot_node', node_id: stack.nodeId });
    }
    // No placement on a cordoned node.
    expect((await stack.create({ image: SLEEPER_IMAGE })).status).toBeGreaterThanOrEqual(400);

    const screen = await why(stack.nodeId);
    expect(screen).toContain('status ready,draining');
    expect(screen).toContain('IN PROGRESS: node_drained');
    expect(screen).toContain('XID 79: GPU has fallen off the bus -> reboot the node (RESTART_BM)');
    expect(screen).toContain(`instance ${b.id}  ready  org tenant-b`);
  }, 300_000);
});
