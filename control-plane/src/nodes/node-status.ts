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

/**
 * Whether nothing was heard from a node for longer than the deadline. `watchingSince`:
 * when this process began listening for agents. Silence counts from the later of the
 * two, so a control plane that restarts gives every node a full deadline from its own
 * start instead of counting its own downtime as the agent's silence.
 */
export function isOverdue(lastSeenAt: number | null, now: number, deadlineMs: number, watchingSince: number | null = null): boolean {
  if (lastSeenAt === null) return false;
  return now - Math.max(lastSeenAt, watchingSince ?? lastSeenAt) > deadlineMs;
}

export type StoreVerdict = { mark: true } | { mark: false; status: NodeStatus; lastSeenAt: number | null };

/**
 * A node looks silent past the deadline in this process's memory; before it is marked
 * unreachable the store has the last word. With several replicas the agent's stream may
 * be held by another one, which flushes the node's last-seen to the store (and any
 * replica may already have settled its status): the later last-seen counts, and a node
 * the store no longer has `ready` is adopted as it is there, not marked again.
 */
export function storeVerdict(
  memoryLastSeenAt: number,
  stored: Pick<NodeRecord, 'status' | 'lastSeenAt'> | undefined,
  now: number,
  deadlineMs: number,
  watchingSince: number | null,
): StoreVerdict {
  if (!stored) return { mark: true };
  const lastSeenAt = Math.max(memoryLastSeenAt, stored.lastSeenAt ?? memoryLastSeenAt);
  if (stored.status !== 'ready') return { mark: false, status: stored.status, lastSeenAt };
  if (!isOverdue(lastSeenAt, now, deadlineMs, watchingSince)) return { mark: false, status: 'ready', lastSeenAt };
  return { mark: true };
}

/** A pause shorter than this is never treated as one (a loaded host's timers run late). */
export const MIN_STALL_MS = 5_000;

/**
 * Whether this process was deaf for a while: its sweep timer fired `gapMs` (real time)
 * after the previous one, more than half a deadline (and at least MIN_STALL_MS) — a
 * start-up that kept the event loop busy, a long pause. Agents' messages sat unread in
 * its sockets meanwhile, so their silence counts from the end of the pause.
 */
export function wasStalled(gapMs: number, deadlineMs: number): boolean {
  return gapMs > Math.max(deadlineMs / 2, MIN_STALL_MS);
}

type Schedulability = Pick<NodeRecord, 'status' | 'cordoned' | 'draining'> & { hostFacts?: NodeRecord['hostFacts'] };

/** The node said the disk holding Docker's data is nearly full (HostFacts.disk_pressure, protocol 5). */
export const hasDiskPressure = (node: Schedulability): boolean => node.hostFacts?.['disk_pressure'] === true;

/**
 * What the node's agent reports of its host's set-up as keeping tenants apart less well
 * (HostFacts.isolation_warnings, protocol 7); a code a newer agent sends is kept when it
 * looks like one (it becomes a label value), at most 16.
 */
export function isolationWarnings(node: { hostFacts?: NodeRecord['hostFacts'] | undefined }): string[] {
  const reported = node.hostFacts?.['isolation_warnings'];
  if (!Array.isArray(reported)) return [];
  return [...new Set(reported.filter((w): w is string => typeof w === 'string' && /^[a-z0-9_]{1,40}$/.test(w)))].slice(0, 16);
}

/** The scheduler may place new work only on ready nodes no operator has taken out and whose disk has room. */
export function isSchedulable(node: Schedulability): boolean {
  return node.status === 'ready' && !node.cordoned && !node.draining && !hasDiskPressure(node);
}

/** What on-call reads in the STATUS column: `ready`, `ready,cordoned`, `unreachable,draining`, `ready,disk-pressure`. */
export function statusLabel(node: Schedulability): string {
  // Draining implies cordoned, so say only the stronger flag.
  const flags = [node.draining ? 'draining' : node.cordoned ? 'cordoned' : '', hasDiskPressure(node) ? 'disk-pressure' : ''].filter(Boolean);
  return [node.status, ...flags].join(',');
}
