// A stop that is never lost, end to end: the real control plane, a real agent process and
// the real Docker engine. A tenant's container ignores SIGTERM; the agent is killed (as a
// crash would) during the grace, so the SIGKILL it owed never comes. The control plane
// sends the stop again on the new agent's Hello, with what is left of the grace counted
// from the first request, and on-demand billing ends when the container was killed.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STUBBORN_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';

// Longer than the 60 s minimum bill, so the billed seconds show where the kill happened.
const GRACE_MS = 65_000;
const docker = new Docker();
let stack: InstanceStack;

beforeAll(async () => {
  stack = await startInstanceStack({ name: 'billing-e2e', gpus: 1, graceMs: GRACE_MS });
}, 120_000);
afterAll(() => stack?.close());

const containersOf = async (id: string) => docker.listContainers({ all: true, filters: { label: [`svc.instance=${id}`] } });

describe('a stop across an agent restart', () => {
  it('ends terminated, its container killed at the first request plus the grace, and bills up to the kill', async () => {
    const { status, body } = await stack.create({ image: STUBBORN_IMAGE });
    expect(status).toBe(201);
    const ready = await stack.waitFor(body.id, ['ready']);
    await new Promise((r) => setTimeout(r, 300)); // let the image's trap be installed

    const requestedAt = Date.now();
    expect((await stack.api('POST', `/v1/instances/${body.id}/terminate`)).body.status).toBe('draining');
    // The agent got the stop and sent SIGTERM, which the container ignores; then it crashes.
    await stack.waitFor(body.id, ['draining']);
    await stack.restartAgent();
    const reconnectedAt = Date.now();

    const done = await stack.waitFor(body.id, ['terminated'], GRACE_MS + 60_000);
    expect(await containersOf(body.id)).toEqual([]);
    const charges = await stack.cp.store.instances.chargesFor(body.id);
    // One line, or two when a full hour passed while it ran (hourly accrual, then the rest at its end).
    expect(new Set(charges.map((c) => c.kind))).toEqual(new Set(['on_demand']));
    const billed = charges.reduce((sum, c) => sum + Number(/^(\d+) s on demand/.exec(c.description)![1]), 0);
    const readyAt = Date.parse(ready.ready_at);
    // Killed no earlier than the grace allowed, counted from the first request ...
    expect(billed).toBeGreaterThanOrEqual(Math.floor((requestedAt + GRACE_MS - readyAt) / 1000));
    // ... and not after a fresh grace from the reconnect would have ended: the remaining grace was kept.
    expect(billed).toBeLessThan(Math.ceil((reconnectedAt + GRACE_MS - readyAt) / 1000));
    // Billing ended at the kill, not after the control plane heard of it.
    expect(billed).toBeLessThanOrEqual(Math.ceil((Date.parse(done.terminated_at) - readyAt) / 1000));
  }, 240_000);
});
