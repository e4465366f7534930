import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { registerFleetMetrics, SNAPSHOT_TTL_MS, type FleetSources } from './fleet-metrics.js';
import type { NodeRecord } from '../store/node-store.js';

function fleet() {
  const reads = { replicas: 0, instances: 0, nodes: 0, backlog: 0 };
  let timer = 0;
  const clock = new ManualClock(1_000_000);
  const node = (id: string, status: NodeRecord['status'], forgottenAt: number | null = null) =>
    ({ id, hostname: id, pool: 'eu', status, forgottenAt }) as NodeRecord;
  const sources: FleetSources = {
    clock,
    desiredReplicas: [{ model: 'tiny-chat', quantization: 'int4', pool: 'na', count: 2 }],
    replicas: async () => (reads.replicas++, []),
    instances: async () => (reads.instances++, []),
    nodes: async () => (reads.nodes++, [node('a', 'ready'), node('b', 'unreachable'), node('c', 'unreachable', 5)]),
    deliveryBacklog: async () => (reads.backlog++, { pending: 3, oldestCreatedAt: clock.now() - 90_000 }),
    cacheTimer: () => timer,
  };
  const registry = new Registry();
  const metrics = registerFleetMetrics(registry, sources);
  return { registry, metrics, reads, advance: (ms: number) => (timer += ms) };
}

describe('fleet metrics', () => {
  it('exports every state of a desired target at 0, nodes by pool and status (forgotten left out), the backlog and its age', async () => {
    const { registry } = fleet();
    const text = await registry.metrics();
    expect(text).toContain('svc_replicas_desired{model="tiny-chat",quantization="int4",pool="na"} 2');
    expect(text).toContain('svc_replicas{model="tiny-chat",quantization="int4",pool="na",state="running"} 0');
    expect(text).toContain('svc_nodes{pool="eu",status="unreachable"} 1');
    expect(text).toContain('svc_nodes{pool="eu",status="ready"} 1');
    expect(text).toContain('svc_nodes{pool="apac",status="ready"} 0');
    expect(text).toContain('svc_webhook_deliveries_pending 3');
    expect(text).toContain('svc_webhook_oldest_pending_delivery_age_seconds 90');
    expect(text).toContain('svc_agents_connected 0');
  });

  it('a flood of key-less scrapes reads the store once per snapshot lifetime', async () => {
    const { registry, reads, advance } = fleet();
    await Promise.all(Array.from({ length: 50 }, () => registry.metrics()));
    expect(reads).toEqual({ replicas: 1, instances: 1, nodes: 1, backlog: 1 });
    advance(SNAPSHOT_TTL_MS - 1);
    await registry.metrics();
    expect(reads.nodes).toBe(1);
    advance(1);
    await registry.metrics();
    expect(reads).toEqual({ replicas: 2, instances: 2, nodes: 2, backlog: 2 });
  });

  it('counts webhook attempts by outcome and reads connected agents once the gateway attaches', async () => {
    const { registry, metrics } = fleet();
    metrics.webhookAttempt('retry');
    metrics.webhookAttempt('retry');
    metrics.webhookAttempt('succeeded');
    metrics.attachAgents(() => 7);
    const text = await registry.metrics();
    expect(text).toContain('svc_webhook_delivery_attempts_total{outcome="failed_will_retry"} 2');
    expect(text).toContain('svc_webhook_delivery_attempts_total{outcome="succeeded"} 1');
    expect(text).toContain('svc_webhook_delivery_attempts_total{outcome="failed_gave_up"} 0');
    expect(text).toContain('svc_agents_connected 7');
  });
});
