// Settling a node that is gone for good (`svcctl nodes forget`): its instances end as of
// its last contact (billed up to it; unready ones fail and are refunded; reservations
// keep their charge), and the node is marked forgotten and cordoned. If it ever comes
// back, its Hello lists containers of instances that are over, and the control plane
// stops them; it stays cordoned until an operator uncordons it.
import { ApiError, toRfc3339, type Clock } from '@svc/shared';
import type { InstanceRecord } from '../instances/instance-record.js';
import type { NodeRecord, NodeStore } from '../store/node-store.js';
import { formatAgo } from './views.js';

/** Why the node may not be forgotten yet, or null. Only a node silent for `forgetAfterMs` may be. */
export function forgetRefusal(node: Pick<NodeRecord, 'id' | 'lastSeenAt'>, now: number, forgetAfterMs: number): string | null {
  if (node.lastSeenAt === null || now - node.lastSeenAt >= forgetAfterMs) return null;
  return (
    `node ${node.id} was last heard of ${formatAgo(node.lastSeenAt, now)}; a node can be forgotten after ` +
    `${Math.round(forgetAfterMs / 60_000)} min without contact (SVC_NODE_FORGET_AFTER_MS)`
  );
}

export interface ForgetDeps {
  nodes: NodeStore;
  instances: { forgetNode(nodeId: string, lastContact: number | null): Promise<InstanceRecord[]> };
  clock: Clock;
  forgetAfterMs: number;
}

export async function forgetNode(deps: ForgetDeps, node: NodeRecord): Promise<{ node: NodeRecord; settled: InstanceRecord[] }> {
  const now = deps.clock.now();
  const refusal = forgetRefusal(node, now, deps.forgetAfterMs);
  if (refusal) throw new ApiError('invalid_request', refusal);
  // Marked first: from here on nothing is placed there, and a late Hello finds its instances over.
  const marked = await deps.nodes.markForgotten(node.id, now, {
    nodeId: node.id,
    gpuUuid: null,
    gpuIndex: null,
    kind: 'other',
    xid: null,
    healthy: null,
    message: `forgotten by an operator; instances settled as of its last contact (${node.lastSeenAt === null ? 'never' : toRfc3339(node.lastSeenAt)})`,
    at: now,
  });
  const settled = await deps.instances.forgetNode(node.id, node.lastSeenAt);
  return { node: marked ?? node, settled };
}
