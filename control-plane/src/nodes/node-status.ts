// A node's status as a state machine: one table (status, event) -> status and the one
// function that applies it. Cordon and drain are operator flags beside the status, not
// statuses: an unreachable node can be cordoned, and stays cordoned when it returns.
import type { NodeRecord, NodeStatus } from '../store/node-store.js';

/**
 * session_started: the agent said Hello with a valid identity.
 * message_received: any message on a live session (heartbeat, telemetry, ...).
 * deadline_missed: nothing heard from the node within the deadline.
 */
export type NodeEvent = 'session_started' | 'message_received' | 'deadline_missed';

const TRANSITIONS: Record<NodeStatus, Partial<Record<NodeEvent, NodeStatus>>> = {
  enrolled: { session_started: 'ready', message_received: 'ready' },
  ready: { session_started: 'ready', message_received: 'ready', deadline_missed: 'unreachable' },
  unreachable: { session_started: 'ready', message_received: 'ready', deadline_missed: 'unreachable' },
};

/** The status after `event`; events that do not apply leave the status as it is. */
export function nextNodeStatus(status: NodeStatus, event: NodeEvent): NodeStatus {
  return TRANSITIONS[status][event] ?? status;
}

/** Whether nothing was heard from a node for longer than the deadline. */
export function isOverdue(lastSeenAt: number | null, now: number, deadlineMs: number): boolean {
  return lastSeenAt !== null && now - lastSeenAt > deadlineMs;
}

/** The scheduler may place new work only on ready nodes no operator has taken out. */
export function isSchedulable(node: Pick<NodeRecord, 'status' | 'cordoned' | 'draining'>): boolean {
  return node.status === 'ready' && !node.cordoned && !node.draining;
}

/** What on-call reads in the STATUS column: `ready`, `ready,cordoned`, `unreachable,draining`. */
export function statusLabel(node: Pick<NodeRecord, 'status' | 'cordoned' | 'draining'>): string {
  // Draining implies cordoned, so say only the stronger flag.
  const flag = node.draining ? 'draining' : node.cordoned ? 'cordoned' : '';
  return flag ? `${node.status},${flag}` : node.status;
}
