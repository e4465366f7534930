// Fleet and queue series of the public /metrics, read from the services at scrape time:
// replicas by state against desired, instances and nodes by status, connected agents,
// and the webhook delivery backlog. Every known (pool, status) pair is exported, at 0
// when empty, so alert rules can compare series that always exist. No node, org or key
// identities: those belong on the operators' listener (fleet size and tenant names are
// not for whoever can reach the public port).
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Clock } from '@svc/shared';
import { POOLS } from '../models/catalog.js';
import { INSTANCE_STATUSES, TERMINAL } from '../instances/lifecycle.js';
import type { InstanceRecord } from '../instances/instance-record.js';
import type { ReplicaRecord } from '../replicas/replica-record.js';
import { REPLICA_STATUSES, TERMINAL_REPLICA_STATUSES } from '../replicas/replica-status.js';
import type { DesiredReplica } from '../replicas/desired.js';
import type { NodeRecord, NodeStatus } from '../store/node-store.js';
import { hasDiskPressure } from '../nodes/node-status.js';
import type { AttemptDecision } from '../webhooks/retry-schedule.js';

export interface FleetSources {
  clock: Clock;
  desiredReplicas: readonly DesiredReplica[];
  /** Replicas not ended. */
  replicas(): Promise<ReplicaRecord[]>;
  /** Instances not terminated or failed. */
  instances(): Promise<InstanceRecord[]>;
  nodes(): Promise<NodeRecord[]>;
  /** Agents with a live gRPC session to this control plane; unknown (not exported) until the gateway attaches. */
  connectedAgents?: () => number;
  deliveryBacklog(): Promise<{ pending: number; oldestCreatedAt: number | null }>;
  /** Milliseconds for the snapshot's lifetime: a monotonic timer, not the (injectable, maybe frozen) business clock. */
  cacheTimer?: () => number;
}

const NODE_STATUSES: readonly NodeStatus[] = ['enrolled', 'ready', 'unreachable'];
const LIVE_REPLICA_STATUSES = REPLICA_STATUSES.filter((s) => !TERMINAL_REPLICA_STATUSES.has(s));
const LIVE_INSTANCE_STATUSES = INSTANCE_STATUSES.filter((s) => !TERMINAL.has(s));
const ATTEMPT_OUTCOMES: Record<AttemptDecision['kind'], string> = { succeeded: 'succeeded', retry: 'failed_will_retry', give_up: 'failed_gave_up', disable: 'endpoint_gone' };

export interface FleetMetrics {
  /** The delivery worker's attempt observer. */
  webhookAttempt(outcome: AttemptDecision['kind']): void;
  /** The agent gateway exists only in a serving process (server.ts); it attaches here. */
  attachAgents(count: () => number): void;
}

/**
 * /metrics needs no key, so a scrape must not be a way to load the store: the state is
 * read once per SNAPSHOT_TTL_MS at most, and concurrent scrapes share the read in flight.
 */
export const SNAPSHOT_TTL_MS = 1_000;

interface Snapshot {
  replicas: ReplicaRecord[];
  instances: InstanceRecord[];
  nodes: NodeRecord[];
  backlog: { pending: number; oldestCreatedAt: number | null };
}

export function registerFleetMetrics(registry: Registry, sources: FleetSources): FleetMetrics {
  const registers = [registry];
  let cached: { at: number; value: Promise<Snapshot> } | undefined;
  const snapshot = (): Promise<Snapshot> => {
    const now = (sources.cacheTimer ?? performance.now.bind(performance))();
    if (!cached || now - cached.at >= SNAPSHOT_TTL_MS) {
      const value = Promise.all([sources.replicas(), sources.instances(), sources.nodes(), sources.deliveryBacklog()]).then(
        ([replicas, instances, nodes, backlog]) => ({ replicas, instances, nodes, backlog }),
      );
      cached = { at: now, value };
      // A failed read is not kept: the next scrape tries again.
      value.catch(() => {
        if (cached?.value === value) cached = undefined;
      });
    }
    return cached.value;
  };
  const target = (d: { model: string; quantization: string; pool: string }) => `${d.model}\u0000${d.quantization}\u0000${d.pool}`;

  new Gauge({
    name: 'svc_replicas_desired',
    // Read from the shared store: every worker exports the same value, counted once when merged.
    aggregator: 'first',
    help: 'Model-server replicas wanted (SVC_REPLICAS), by model, quantization and pool.',
    labelNames: ['model', 'quantization', 'pool'],
    registers,
    collect() {
      this.reset();
      for (const d of sources.desiredReplicas) this.inc({ model: d.model, quantization: d.quantization, pool: d.pool }, d.count);
    },
  });

  new Gauge({
    name: 'svc_replicas',
    aggregator: 'first',
    help: 'Model-server replicas not ended, by model, quantization, pool and state; every state of a desired target is exported, 0 when empty.',
    labelNames: ['model', 'quantization', 'pool', 'state'],
    registers,
    async collect() {
      const { replicas } = await snapshot();
      this.reset();
      const seen = new Set<string>();
      for (const d of [...sources.desiredReplicas, ...replicas]) {
        if (seen.has(target(d))) continue;
        seen.add(target(d));
        for (const state of LIVE_REPLICA_STATUSES) this.set({ model: d.model, quantization: d.quantization, pool: d.pool, state }, 0);
      }
      for (const r of replicas) this.inc({ model: r.model, quantization: r.quantization, pool: r.pool, state: r.status });
    },
  });

  new Gauge({
    name: 'svc_instances',
    aggregator: 'first',
    help: 'GPU instances not terminated or failed, by pool and status.',
    labelNames: ['pool', 'status'],
    registers,
    async collect() {
      const { instances } = await snapshot();
      this.reset();
      for (const pool of POOLS) for (const status of LIVE_INSTANCE_STATUSES) this.set({ pool, status }, 0);
      for (const i of instances) this.inc({ pool: i.pool, status: i.status });
    },
  });

  new Gauge({
    name: 'svc_nodes',
    aggregator: 'first',
    help: 'Enrolled nodes not forgotten, by pool and status (ready, unreachable, enrolled = never connected).',
    labelNames: ['pool', 'status'],
    registers,
    async collect() {
      const nodes = (await snapshot()).nodes.filter((n) => !n.forgottenAt);
      this.reset();
      for (const pool of POOLS) for (const status of NODE_STATUSES) this.set({ pool, status }, 0);
      for (const n of nodes) this.inc({ pool: n.pool, status: n.status });
    },
  });

  new Gauge({
    name: 'svc_nodes_disk_pressure',
    aggregator: 'first',
    help: "Ready nodes whose disk holding Docker's data is nearly full (bytes or inodes past SVC_DISK_PRESSURE_PERCENT), by pool: nothing new is placed on them.",
    labelNames: ['pool'],
    registers,
    async collect() {
      const nodes = (await snapshot()).nodes.filter((n) => !n.forgottenAt && n.status === 'ready');
      this.reset();
      for (const pool of POOLS) this.set({ pool }, 0);
      for (const n of nodes) if (hasDiskPressure(n)) this.inc({ pool: n.pool });
    },
  });

  let agents: (() => number) | undefined = sources.connectedAgents;
  new Gauge({
    name: 'svc_agents_connected',
    help: 'Node agents with a live gRPC session to this control plane (with SVC_WORKERS, summed over its workers: each holds its own).',
    registers,
    collect() {
      this.set(agents ? agents() : 0);
    },
  });

  new Gauge({
    name: 'svc_webhook_deliveries_pending',
    aggregator: 'first',
    help: 'Webhook deliveries not yet delivered (first try or waiting for a retry) to enabled endpoints.',
    registers,
    async collect() {
      this.set((await snapshot()).backlog.pending);
    },
  });
  new Gauge({
    name: 'svc_webhook_oldest_pending_delivery_age_seconds',
    aggregator: 'first',
    help: 'Age of the oldest pending webhook delivery; 0 when none is pending.',
    registers,
    async collect() {
      const { oldestCreatedAt } = (await snapshot()).backlog;
      this.set(oldestCreatedAt === null ? 0 : Math.max(0, (sources.clock.now() - oldestCreatedAt) / 1000));
    },
  });

  const attempts = new Counter({
    name: 'svc_webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts, by outcome (succeeded, failed_will_retry, failed_gave_up, endpoint_gone).',
    labelNames: ['outcome'],
    registers,
  });
  for (const outcome of Object.values(ATTEMPT_OUTCOMES)) attempts.inc({ outcome }, 0);

  return {
    webhookAttempt: (outcome) => attempts.inc({ outcome: ATTEMPT_OUTCOMES[outcome] }),
    attachAgents: (count) => {
      agents = count;
    },
  };
}
