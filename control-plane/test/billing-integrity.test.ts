// Billing integrity over real HTTP and SQLite, as a paying customer (and a hostile one)
// sees it: a failed reservation nets to zero with a visible refund line, and sandbox keys
// cannot create the real, billed instances. Agent reports are fed to the instance service
// the way the gateway hands them over; the Docker-backed stop paths are in
// test/billing.e2e.test.ts.
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ManualClock, newId } from '@svc/shared';
import { hashKeyValue, generateKeyValue, lastFour, KEY_PREFIXES } from '../src/keys/api-key.js';
import { addReadyNode, expectError, startControlPlane, type TestControlPlane } from './harness.js';

// Days before the real now: svcctl (another process) judges a node's silence by the real clock.
const clock = new ManualClock(Date.UTC(2026, 10, 20, 3));
let cp: TestControlPlane;
let live: string;
let admin: string;
let nodeId: string;

beforeAll(async () => {
  cp = await startControlPlane({ clock });
  live = await cp.key({ scopes: ['compute:write', 'compute:read', 'billing:read'] });
  admin = await cp.key({ admin: true });
  ({ nodeId } = await addReadyNode(cp, { gpus: 8 }));
  cp.app.services.taskDispatcher.attach(() => true);
});
afterAll(() => cp.close());

const charges = async (instanceId: string) =>
  ((await cp.request('GET', '/v1/billing/charges?limit=100', { key: live })).body.data as Array<{ instance_id: string; kind: string; amount: number; description: string }>).filter(
    (c) => c.instance_id === instanceId,
  );

describe('a failed reservation', () => {
  it('lists the up-front charge and a refund line that nets it to zero', async () => {
    const created = await cp.request('POST', '/v1/instances', { key: live, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 24, image: '127.0.0.1:5000/does-not/exist:1' } });
    expect(created.status).toBe(201);
    const id = created.body.id as string;
    clock.advance(5_000);
    // What the agent reports for an image that does not exist.
    await cp.app.services.instances.onTaskState(nodeId, id, 'pulling', { progress: 0 });
    await cp.app.services.instances.onTaskState(nodeId, id, 'failed', { message: 'pull failed: manifest unknown' });
    expect((await cp.request('GET', `/v1/instances/${id}`, { key: live })).body).toMatchObject({ status: 'failed', failure_reason: 'pull failed: manifest unknown' });
    const lines = await charges(id);
    // Newest first: the credit, then the 24 h charge ($2.49 x 0.7 x 24 = $41.832).
    expect(lines.map((c) => [c.kind, c.amount])).toEqual([['refund', -41.832], ['reservation', 41.832]]);
    expect(lines[0]!.description).toContain(id);
    expect(lines.reduce((sum, c) => sum + c.amount, 0)).toBe(0);
  });

  it('is refunded when its node is lost before ready', async () => {
    const { nodeId: other } = await addReadyNode(cp, { gpus: 8, pool: 'eu' });
    const created = await cp.request('POST', '/v1/instances', { key: live, body: { sku: 'h100-80gb', gpus: 8, duration_hours: 24, pool: 'eu' } });
    expect(created.body.node_id).toBe(other);
    clock.advance(5_000);
    await cp.app.services.instances.onNodeLost(other);
    const lines = await charges(created.body.id);
    expect(lines.map((c) => c.kind)).toEqual(['refund', 'reservation']);
    expect(lines.reduce((sum, c) => sum + c.amount, 0)).toBe(0);
  });
});

describe('sandbox keys', () => {
  it('cannot be given compute:write', async () => {
    const res = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { kind: 'test', scopes: ['compute:write', 'compute:read'] } });
    expect(expectError(res, 400, 'invalid_request').message).toContain('sandbox keys');
    // An admin test key gets every scope but compute:write.
    const adminTest = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { kind: 'test', admin: true } });
    expect(adminTest.status).toBe(201);
    expect(adminTest.body.scopes).not.toContain('compute:write');
  });

  it('get 403 on create even when they hold compute:write (a key made before the rule), and nothing is charged', async () => {
    const value = generateKeyValue('test');
    const keyId = newId('key');
    await cp.store.keys.create(
      { id: keyId, orgId: cp.org.id, name: 'old sandbox', kind: 'test', admin: false, scopes: ['compute:write', 'compute:read', 'billing:read'], prefix: KEY_PREFIXES.test, last4: lastFour(value), createdAt: clock.now(), revokedAt: null },
      { hash: hashKeyValue(value), keyId, last4: lastFour(value), createdAt: clock.now(), expiresAt: null },
    );
    const before = (await cp.request('GET', '/v1/billing/charges?limit=100', { key: live })).body.data.length;
    const res = await cp.request('POST', '/v1/instances', { key: value, body: { sku: 'h100-80gb', gpus: 1, duration_hours: 24 } });
    const error = expectError(res, 403, 'forbidden_scope');
    expect(error.message).toContain('sandbox keys (svc_sk_test_)');
    expect(error.message).toContain('live key');
    const listed = await cp.request('GET', '/v1/instances?limit=100', { key: value });
    expect(listed.status).toBe(200);
    expect((await cp.request('GET', '/v1/billing/charges?limit=100', { key: live })).body.data.length).toBe(before);
  });
});

describe('svcctl nodes forget', () => {
  const svcctl = fileURLToPath(new URL('../src/cli/svcctl.ts', import.meta.url));
  const run = (...args: string[]) =>
    promisify(execFile)(process.execPath, ['--import', 'tsx', svcctl, '--data-dir', cp.dataDir, ...args], { env: { ...process.env, SVC_LOG_LEVEL: 'silent' } });

  it('settles a lost node: instances end as of its last contact, unready reservations are refunded, the node is cordoned', async () => {
    const { nodeId: lost } = await addReadyNode(cp, { gpus: 8, pool: 'apac' });
    const body = { sku: 'h100-80gb', pool: 'apac' };
    const onDemand = (await cp.request('POST', '/v1/instances', { key: live, body: { ...body, gpus: 4 } })).body.id as string;
    const unready = (await cp.request('POST', '/v1/instances', { key: live, body: { ...body, gpus: 2, duration_hours: 24 } })).body.id as string;
    await cp.app.services.instances.onTaskState(lost, onDemand, 'running', {});
    // Its last contact, 2 h after the instance became ready; then nothing for days.
    clock.advance(7_200_000);
    await cp.store.nodes.flushTelemetry([{ nodeId: lost, lastSeenAt: clock.now(), gpus: [] }]);

    const out = JSON.parse((await run('nodes', 'forget', lost, '--json')).stdout);
    expect(out.instances).toEqual(expect.arrayContaining([{ id: onDemand, status: 'terminated' }, { id: unready, status: 'failed' }]));
    // 2 h at its hourly price (4 x H100 in apac), billed to the last contact, not to when svcctl ran.
    const perHour = (await cp.request('GET', `/v1/instances/${onDemand}`, { key: live })).body.price.per_hour as number;
    expect((await charges(onDemand)).map((c) => [c.kind, c.amount])).toEqual([['on_demand', Math.round(perHour * 2 * 1e6) / 1e6]]);
    expect((await charges(unready)).reduce((sum, c) => sum + c.amount, 0)).toBe(0);
    const node = (await cp.store.nodes.getNode(lost))!;
    expect(node).toMatchObject({ cordoned: true });
    expect(node.forgottenAt).toEqual(expect.any(Number));
  });

  it('refuses a node heard from recently, naming the setting', async () => {
    const { nodeId: recent } = await addReadyNode(cp, { gpus: 8 });
    await cp.store.nodes.flushTelemetry([{ nodeId: recent, lastSeenAt: Date.now(), gpus: [] }]);
    const failed = await run('nodes', 'forget', recent).then(() => null, (err: { code: number; stderr: string }) => err);
    expect(failed?.code).toBe(1);
    expect(failed?.stderr).toContain('SVC_NODE_FORGET_AFTER_MS');
    expect((await cp.store.nodes.getNode(recent))!.forgottenAt).toBeNull();
  });
});
