// How the replica service hears from agents: task states of REPLICA tasks, sessions
// opening (with what the agent runs) and nodes going silent. Beside the instances'
// hooks; server.ts hands the gateway both (combineGatewayHooks).
import type { TaskState__Output } from '@svc/proto';
import type { GatewayDeps } from '../agents/gateway.js';
import type { ReplicaLogger, ReplicaService } from './replica-service.js';

type TaskHooks = Required<Pick<GatewayDeps, 'onTaskState' | 'onNodeConnected' | 'onNodeUnreachable'>>;

export function replicaGatewayHooks(replicas: ReplicaService, log: ReplicaLogger): TaskHooks {
  return {
    onTaskState: (nodeId, state) => {
      if (state.kind !== 'REPLICA') return;
      // A failure is logged by the service's per-replica queue.
      replicas.onTaskState(nodeId, state).catch(() => undefined);
    },
    onNodeConnected: (nodeId, running: TaskState__Output[]) => {
      replicas.onNodeConnected(nodeId, running).catch((err: unknown) => log.error({ err, node: nodeId }, 'settling replicas of a reconnected node failed'));
    },
    onNodeUnreachable: (nodeId) => {
      replicas.onNodeLost(nodeId).catch((err: unknown) => log.error({ err, node: nodeId }, 're-placing replicas of a lost node failed'));
    },
  };
}
