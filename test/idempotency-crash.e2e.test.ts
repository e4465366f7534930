// Idempotency survives a cut connection and a crash (issue 11, item 13): a create whose
// answer is lost right after the control plane committed it, retried with the same
// X-Service-Idempotency-Key while the first request is still held, after it finished,
// and after a SIGKILL and restart of the control plane, is answered with the one
// instance; exactly one instance (one container, one charge) exists per key. A real
// control-plane process (test/support/control-plane-entry.ts holds a create right after
// its commit), a real agent and Docker.
import { randomUUID } from 'node:crypto';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startCrashStack, type CrashStack } from './support/crash-stack.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { eventually } from './support/node-agent-process.js';

let stack: CrashStack;
beforeAll(async () => {
  stack = await startCrashStack({ name: 'idem-crash', gpus: 2, env: { SVC_TEST_HOLD_AFTER_COMMIT: '1' } });
});
afterAll(async () => stack?.close());

/** Sends a create and never reads its answer; `port` is the client side of its connection. */
function sendCreate(idem: string, body: unknown): { request: ClientRequest; port: Promise<number> } {
  const url = new URL('/v1/instances', stack.cp.baseUrl);
  const request = httpRequest(url, {
    method: 'POST',
    headers: { authorization: `Bearer ${stack.key}`, 'content-type': 'application/json', 'x-service-idempotency-key': idem },
  });
  // The answer never comes: the test cuts the connection, or kills the server.
  request.on('error', () => undefined);
  request.on('response', () => {
    throw new Error('the create answered although the test holds it');
  });
  const port = new Promise<number>((resolve) => request.on('socket', (socket) => socket.once('connect', () => resolve(socket.localPort!))));
  request.end(JSON.stringify(body));
  return { request, port };
}

const committed = (known: Set<string>) => (line: Record<string, unknown>) =>
  typeof line.test_committed === 'string' && !known.has(line.test_committed) ? line.test_committed : undefined;
const create = (idem: string, body: unknown) => stack.api('POST', '/v1/instances', body, { 'x-service-idempotency-key': idem });
const instances = async (): Promise<Array<{ id: string; status: string }>> => (await stack.api('GET', '/v1/instances?limit=100')).body.data;
const waitFor = (id: string, status: string) =>
  eventually(async () => ((await stack.api('GET', `/v1/instances/${id}`)).body.status === status ? true : undefined), 60_000, `instance ${id} to be ${status}`);

const seen = new Set<string>();

describe('idempotency across a cut connection and a crash', () => {
  it('a create cut right after its commit: retries now, after it finished and after a restart answer the one instance', { timeout: 180_000 }, async () => {
    const idem = randomUUID();
    const body = { sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE, labels: { case: 'cut' } };
    const first = sendCreate(idem, body);
    const id = await stack.cp.line(committed(seen));
    seen.add(id);
    const port = await first.port;
    first.request.destroy();
    await stack.cp.line((l) => (l.test_socket_closed === port ? true : undefined));

    // The first request is still held after its commit: the retry gets what committed.
    const during = await create(idem, body);
    expect(during.status, JSON.stringify(during.body)).toBe(201);
    expect(during.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(during.body.id).toBe(id);

    // It goes on, answers a socket that is gone, and the instance starts.
    stack.cp.child.kill('SIGUSR2');
    await waitFor(id, 'ready');
    const after = await create(idem, body);
    expect(after.status).toBe(201);
    expect(after.body.id).toBe(id);

    await stack.restart({ SVC_TEST_HOLD_AFTER_COMMIT: '1' });
    const restarted = await create(idem, body);
    expect(restarted.status).toBe(201);
    expect(restarted.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(restarted.body.id).toBe(id);
    expect((await instances()).map((i) => i.id)).toEqual([id]);
  });

  it('a control plane killed right after committing a create: after restart the retry answers it, once, with one charge', { timeout: 180_000 }, async () => {
    const idem = randomUUID();
    const body = { sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE, duration_hours: 1, labels: { case: 'crash' } };
    sendCreate(idem, body);
    const id = await stack.cp.line(committed(seen));
    seen.add(id);
    // The instance and its charge committed; the answer and the start order never left.
    await stack.restart({ SVC_TEST_HOLD_AFTER_COMMIT: '0' });

    const retried = await create(idem, body);
    expect(retried.status, JSON.stringify(retried.body)).toBe(201);
    expect(retried.headers.get('x-service-idempotent-replay')).toBe('true');
    expect(retried.body.id).toBe(id);
    expect((await create(idem, body)).body.id).toBe(id);

    // The node's reconnect starts what committed without its start order.
    await waitFor(id, 'ready');
    const all = await instances();
    expect(all.map((i) => i.id).sort()).toEqual([...seen].sort());
    const charges = (await stack.api('GET', '/v1/billing/charges?limit=100')).body.data.filter((c: { instance_id: string }) => c.instance_id === id);
    expect(charges).toHaveLength(1);
    const containers = await stack.containers();
    expect([...containers.keys()].sort()).toEqual([...seen].sort());
    expect([...containers.values()]).toEqual(['running', 'running']);
  });
});
