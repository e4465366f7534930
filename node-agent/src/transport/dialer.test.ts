// Failover between control-plane addresses: the real agent against two fake control
// planes (real gRPC servers) that both know its identity, as replicas sharing one store do.
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger, systemClock } from '@svc/shared';
import { startAgent, type RunningAgent } from '../agent.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { protocolOnlyAgentEnv } from '../testing/agent-env.js';
import { FakeControlPlane } from '../testing/fake-control-plane.js';
import { nextTargetIndex } from './dialer.js';

const log = createLogger('silent', 'dialer-test');
const running: RunningAgent[] = [];
const planes: FakeControlPlane[] = [];

afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  await Promise.all(planes.splice(0).map((p) => p.stop()));
});

describe('nextTargetIndex', () => {
  it.each([
    [0, 1, 0],
    [0, 2, 1],
    [1, 2, 0],
    [2, 3, 0],
    [0, 0, 0],
  ])('after %i of %i comes %i', (current, count, next) => {
    expect(nextTargetIndex(current, count)).toBe(next);
  });
});

describe('several control-plane addresses', () => {
  it('moves to the next address when its control plane dies, as the same node with its running tasks, and back again', async () => {
    const first = await new FakeControlPlane().start();
    const second = await new FakeControlPlane().start();
    planes.push(first, second);
    const config = loadAgentConfig(protocolOnlyAgentEnv({ SVC_CONTROL_PLANE: `${first.address},${second.address}` }));
    running.push(await startAgent(config, { log, clock: systemClock }));
    const session = await first.waitFor(() => first.current, 10_000, 'a session with the first control plane');
    // The replicas share the node's identity (one store behind both).
    const [nodeId, secret] = [...first.nodes.entries()][0]!;
    second.nodes.set(nodeId, secret);

    await first.stop();
    const moved = await second.waitFor(() => second.current, 10_000, 'a session with the second control plane');
    expect(moved.hello.node_id).toBe(session.hello.node_id);
    expect(moved.hello.node_secret).toBe(secret);
    expect(second.enrollments).toEqual([]);

    // Round the list: the first comes back and the second dies.
    await first.start();
    await second.stop();
    const back = await first.waitFor(() => first.sessions.length > 1 && first.current, 10_000, 'a session with the first control plane again');
    expect(back.hello.node_id).toBe(nodeId);
    expect(first.enrollments).toHaveLength(1);
  });
});
