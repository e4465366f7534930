// How the instance service hears from agents: the agent gateway's hooks for task states,
// sessions opening (with the tasks the agent runs) and nodes going silent. Only instance
// tasks are handled here; replicas will have hooks of their own.
import type { TaskState__Output } from '@svc/proto';
import type { GatewayDeps } from '../agents/gateway.js';
import { accessFromReport } from './instance-access.js';
import type { InstanceService, ServiceLogger } from './instance-service.js';
import type { AgentTaskState } from './task-dispatch.js';

type InstanceHooks = Required<Pick<GatewayDeps, 'onTaskState' | 'onNodeConnected' | 'onCommandResult' | 'onNodeUnreachable'>>;

export function instanceGatewayHooks(instances: InstanceService, log: ServiceLogger & { debug(obj: object, msg: string): void }): InstanceHooks {
  const instanceTaskIds = (tasks: TaskState__Output[]) => new Set(tasks.filter((t) => t.kind === 'INSTANCE').map((t) => t.task_id));
  return {
    onTaskState: (nodeId, state) => {
      if (state.kind !== 'INSTANCE') return;
      const detail = {
        message: state.message,
        exitCode: state.exit_code,
        progress: state.pull_progress,
        // 0: unknown (an older agent, or no container was found).
        stoppedAt: state.stopped_at_ms > 0 ? state.stopped_at_ms : null,
        ...(state.state === 'running' && state.access ? { access: accessFromReport(state.access) } : {}),
      };
      // A failure is logged by the service's per-instance queue.
      instances.onTaskState(nodeId, state.task_id, state.state as AgentTaskState, detail).catch(() => undefined);
    },
    onNodeConnected: (nodeId, running, lastContact) => {
      const access = new Map(running.filter((t) => t.kind === 'INSTANCE' && t.access).map((t) => [t.task_id, accessFromReport(t.access)]));
      instances.onNodeConnected(nodeId, instanceTaskIds(running), access, lastContact).catch((err: unknown) => log.error({ err, node: nodeId }, 'settling instances of a reconnected node failed'));
    },
    // Task commands are acknowledged here; how the task goes arrives as task states.
    onCommandResult: (nodeId, result) => {
      if (result.ok) log.debug({ node: nodeId, command: result.command_id }, 'task command accepted');
      else log.warn({ node: nodeId, command: result.command_id, code: result.error_code, why: result.error_message }, 'task command refused');
    },
    onNodeUnreachable: (nodeId) => {
      instances.onNodeLost(nodeId).catch((err: unknown) => log.error({ err, node: nodeId }, 'failing instances of a lost node failed'));
    },
  };
}
