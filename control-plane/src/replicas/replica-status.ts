// A replica's status as the control plane keeps it, as one table (status, event) ->
// status and the one function that applies it. Events are what agents report about the
// replica's container and what the reconciler decides; `stopped` and `lost` are final.
import type { AgentTaskState } from '../instances/task-dispatch.js';

export const REPLICA_STATUSES = ['scheduled', 'starting', 'running', 'unhealthy', 'restarting', 'stopping', 'stopped', 'lost'] as const;
export type ReplicaStatus = (typeof REPLICA_STATUSES)[number];

/**
 * scheduled   placed on a node; the start order is sent (or waits for the node's session)
 * starting    the agent pulls the image or the server loads; no health check passed yet
 * running     the latest health check passed: the replica is routable
 * unhealthy   health checks fail while the container runs: not routable
 * restarting  the container ended or never became healthy; the agent restarts it with backoff
 * stopping    no longer wanted (surplus, removed from configuration, drained): stop ordered
 * stopped     the agent stopped and removed it (final)
 * lost        its node became unreachable; the reconciler placed a replacement (final)
 */
export const TERMINAL_REPLICA_STATUSES: ReadonlySet<ReplicaStatus> = new Set(['stopped', 'lost']);

export type ReplicaEvent =
  | 'agent_starting'
  | 'agent_running'
  | 'agent_unhealthy'
  | 'agent_restarting'
  /** The agent no longer runs the replica (exited while the agent was away, failed, gone). */
  | 'agent_ended'
  | 'stop'
  | 'node_lost';

const LIVE: Partial<Record<ReplicaEvent, ReplicaStatus>> = {
  agent_starting: 'starting',
  agent_running: 'running',
  agent_unhealthy: 'unhealthy',
  agent_restarting: 'restarting',
  // Still wanted: the start is ordered again.
  agent_ended: 'scheduled',
  stop: 'stopping',
  node_lost: 'lost',
};

const TRANSITIONS: Record<ReplicaStatus, Partial<Record<ReplicaEvent, ReplicaStatus>>> = {
  scheduled: LIVE,
  starting: LIVE,
  running: LIVE,
  unhealthy: LIVE,
  restarting: LIVE,
  // Late reports of a replica being stopped change nothing; only its end does.
  stopping: { stop: 'stopping', agent_ended: 'stopped', node_lost: 'lost' },
  stopped: {},
  lost: {},
};

/** The status after `event`, or undefined when the event does not apply (the status stays). */
export function nextReplicaStatus(status: ReplicaStatus, event: ReplicaEvent): ReplicaStatus | undefined {
  return TRANSITIONS[status][event];
}

/** What an agent's task state means for a replica; `stopping` reports carry no news. */
export function replicaEventOf(state: AgentTaskState | string): ReplicaEvent | undefined {
  switch (state) {
    case 'pulling':
    case 'starting':
      return 'agent_starting';
    case 'running':
      return 'agent_running';
    case 'unhealthy':
      return 'agent_unhealthy';
    case 'restarting':
      return 'agent_restarting';
    case 'exited':
    case 'failed':
    case 'gone':
      return 'agent_ended';
    default:
      return undefined;
  }
}

/** A restart is counted each time the agent restarts the container or the start is ordered again. */
export function countsAsRestart(from: ReplicaStatus, event: ReplicaEvent): boolean {
  return !TERMINAL_REPLICA_STATUSES.has(from) && from !== 'stopping' && (event === 'agent_restarting' || event === 'agent_ended');
}
