// Reads what the status pages show from the store, in one pass: nodes, GPUs, the recent
// health timeline of each node, live instances and replicas, org names. The pages' pure
// views (fleet-view.ts, public-status.ts) work on this snapshot; callers cache it
// (snapshot-cache.ts) so a page view costs no store reads.
import type { GpuRecord, NodeRecord, NodeStore, StoredHealthEvent } from '../store/node-store.js';
import type { InstanceRecord } from '../instances/instance-record.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { ReplicaRecord } from '../replicas/replica-record.js';
import type { ReplicaStore } from '../store/replica-store.js';
import type { OrgStore } from '../store/store.js';
import type { DesiredReplica } from '../replicas/desired.js';

export interface FleetSource {
  nodes: Pick<NodeStore, 'listNodes' | 'listGpus' | 'listHealthEvents'>;
  instances: Pick<InstanceStore, 'listActive'>;
  replicas: Pick<ReplicaStore, 'listActive'>;
  orgs: Pick<OrgStore, 'list'>;
}

export interface FleetSnapshot {
  /** When it was read (epoch ms). */
  at: number;
  /** Enrolled nodes, forgotten ones left out (an operator settled them as gone). */
  nodes: NodeRecord[];
  gpus: GpuRecord[];
  /** The most recent health events of each node, newest first per node. */
  events: StoredHealthEvent[];
  instances: InstanceRecord[];
  replicas: ReplicaRecord[];
  orgNames: ReadonlyMap<string, string>;
  desired: readonly DesiredReplica[];
}

/** Health events kept per node: enough for an incident's story, bounded for a large fleet. */
export const TIMELINE_PER_NODE = 10;

export async function readFleet(source: FleetSource, desired: readonly DesiredReplica[], now: number): Promise<FleetSnapshot> {
  const [allNodes, gpus, instances, replicas, orgs] = await Promise.all([
    source.nodes.listNodes(),
    source.nodes.listGpus(),
    source.instances.listActive(),
    source.replicas.listActive(),
    source.orgs.list(),
  ]);
  const nodes = allNodes.filter((n) => !n.forgottenAt);
  const events = (await Promise.all(nodes.map((n) => source.nodes.listHealthEvents(n.id, TIMELINE_PER_NODE)))).flat();
  return { at: now, nodes, gpus, events, instances, replicas, orgNames: new Map(orgs.map((o) => [o.id, o.name])), desired };
}
