// A node whose clock is off from the control plane's. Docker stamps a container's end on the
// node's clock and on-demand billing ends there, so without a common timeline a node an hour
// behind billed nothing for an instance that ran ten minutes. Real HTTP and real gRPC: the
// fake agent speaks the protocol with its times an hour behind.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { AgentGateway } from '../src/agents/gateway.js';
import { defaultControlPlaneConfig } from '../src/config.js';
import { instanceGatewayHooks } from '../src/instances/gateway-hooks.js';
import { OperatorKeyService } from '../src/operators/operator-key-service.js';
import { FakeSession, gatewayClient, hello } from './fake-agent.js';
import { eventually } from '../../test/support/node-agent-process.js';
import { addReadyNode, startControlPlane, type TestControlPlane } from './harness.js';

const HOUR_MS = 3_600_000;
const silent = { debug() {}, info() {}, warn() {}, error() {} };
const clock = new ManualClock(Date.UTC(2026, 10, 28, 12));
let cp: TestControlPlane;
let gateway: AgentGateway;
let key: string;
let operatorKey: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  gateway = new AgentGateway({
    config: defaultControlPlaneConfig({ dataDir: cp.dataDir, grpcPort: 0, logLevel: 'silent', nodeDeadlineMs: 10 * HOUR_MS }),
    store: cp.store.nodes,
    enrollment: cp.app.services.enrollment,
    log: silent,
    clock,
    ...instanceGatewayHooks(cp.app.services.instances, silent),
  });
  cp.app.services.taskDispatcher.attach((nodeId, command) => gateway.send(nodeId, command));
  await gateway.listen();
  key = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
  operatorKey = (await new OperatorKeyService(cp.store.operators, clock).create({ scopes: ['operator:read'], name: 'read', createdBy: 'local' })).value;
});
afterAll(async () => {
  await gateway?.close();
  await cp?.close();
});

/** `read`'s value once `ok` accepts it. */
const when = <T>(read: () => Promise<T>, ok: (value: T) => boolean, what: string): Promise<T> =>
  eventually(async () => {
    const value = await read();
    return ok(value) ? value : undefined;
  }, 5_000, what);

describe("a node whose clock is an hour off the control plane's", () => {
  it.each([
    ['behind', -HOUR_MS, 'na', 0],
    ['ahead', HOUR_MS, 'eu', 0],
    // In step, but a heartbeat reached us 5 s after it was stamped (a stalled event loop, a slow link): not an offset.
    ['in step, with a heartbeat held up 5 s', 0, 'apac', 5_000],
  ] as const)('%s: an instance whose container stopped after 8 minutes, reported 2 minutes later, is billed 8 minutes', async (_how, skewMs, pool, heldUpMs) => {
    const nodeNow = () => clock.now() + skewMs;
    const { nodeId, secret } = await addReadyNode(cp, { gpus: 1, pool });
    const agent = new FakeSession(gatewayClient(`127.0.0.1:${gateway.port}`), hello(nodeId, secret, { sent_at_ms: nodeNow(), pool }));
    try {
      await agent.next((m) => m.body === 'welcome');
      agent.send({ host_facts: { hostname: `host-${pool}` } });
      // What operators read: the node's clock against ours, with its host facts.
      const facts = await when(async () => (await cp.request('GET', `/ops/v1/nodes/${nodeId}`, { key: operatorKey })).body?.host_facts, (f) => f?.clock_offset_ms !== undefined, 'the clock offset in the host facts');
      expect(facts.clock_offset_ms).toBe(skewMs);
      const created = await cp.request('POST', '/v1/instances', { key, body: { sku: 'h100-80gb', gpus: 1, pool } });
      expect(created.status).toBe(201);
      expect(created.body.node_id).toBe(nodeId);
      const id = created.body.id as string;
      const start = await agent.next((m) => m.command?.start_task?.task_id === id);
      agent.send({ command_result: { command_id: start.command!.command_id, ok: true } });
      agent.send({ task_state: { task_id: id, kind: 'INSTANCE', state: 'running', at_ms: nodeNow() } });
      const ready = await when(async () => (await cp.request('GET', `/v1/instances/${id}`, { key })).body, (v) => v.status === 'ready', 'the instance to be ready');
      expect(ready.status).toBe('ready');

      clock.advance(10 * 60_000);
      agent.send({ heartbeat: { seq: 1, sent_at_ms: nodeNow() - heldUpMs } });
      // The container stopped 2 minutes ago, as the node's Docker recorded it (the agent was away, say).
      agent.send({ task_state: { task_id: id, kind: 'INSTANCE', state: 'exited', exit_code: 0, at_ms: nodeNow(), stopped_at_ms: nodeNow() - 120_000 } });
      const ended = await when(async () => (await cp.request('GET', `/v1/instances/${id}`, { key })).body, (v) => v.status !== 'ready', 'the instance to end');

      const lines = (await cp.request('GET', '/v1/billing/charges?limit=100', { key })).body.data.filter((c: { instance_id: string }) => c.instance_id === id);
      const billed = lines.reduce((sum: number, c: { amount: number }) => sum + c.amount, 0);
      expect(billed).toBeCloseTo((ready.price.per_hour * 8) / 60, 6);
    } finally {
      agent.cancel();
    }
  });
});
