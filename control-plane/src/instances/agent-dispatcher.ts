// TaskDispatcher (instances) and ReplicaDispatcher over the agent gateway: StartTask /
// StopTask commands on a node's live session. The gateway starts after the app is built,
// so it is attached late; until then (and in processes without a gateway, like svcctl)
// every send reports "not connected".
import { newId } from '@svc/shared';
import type { Command } from '@svc/proto';
import type { ReplicaDispatcher, StartReplicaOrder } from '../replicas/replica-dispatch.js';
import type { StartTaskOrder, StopTaskOrder, TaskDispatcher } from './task-dispatch.js';

export type CommandSender = (nodeId: string, command: Command) => boolean;

export class AgentTaskDispatcher implements TaskDispatcher, ReplicaDispatcher {
  private send: CommandSender | null = null;

  attach(send: CommandSender): void {
    this.send = send;
  }

  startTask(nodeId: string, order: StartTaskOrder): boolean {
    return this.dispatch(nodeId, {
      command_id: newId('cmd'),
      start_task: {
        task_id: order.taskId,
        kind: 'INSTANCE',
        image: order.image,
        gpu_uuids: order.gpuUuids,
        env: order.env,
        labels: order.labels,
        command: [],
        ssh_authorized_keys: order.sshAuthorizedKeys,
        nano_cpus: order.resources?.nanoCpus ?? 0,
        memory_bytes: order.resources?.memoryBytes ?? 0,
        shm_bytes: order.resources?.shmBytes ?? 0,
        disk_bytes: order.resources?.diskBytes ?? 0,
        network_mbps: order.resources?.networkMbps ?? 0,
      },
    });
  }

  startReplica(nodeId: string, order: StartReplicaOrder): boolean {
    return this.dispatch(nodeId, {
      command_id: newId('cmd'),
      start_task: {
        task_id: order.replicaId,
        kind: 'REPLICA',
        image: order.image,
        gpu_uuids: order.gpuUuids,
        env: order.env,
        labels: order.labels,
        command: order.args,
        ssh_authorized_keys: [],
        container_port: order.containerPort,
        health_path: order.healthPath,
      },
    });
  }

  stopReplica(nodeId: string, order: { replicaId: string; timeoutMs: number; force: boolean }): boolean {
    return this.stopTask(nodeId, { taskId: order.replicaId, timeoutMs: order.timeoutMs, force: order.force });
  }

  stopTask(nodeId: string, order: StopTaskOrder): boolean {
    return this.dispatch(nodeId, {
      command_id: newId('cmd'),
      stop_task: { task_id: order.taskId, signal: 'SIGTERM', timeout_ms: order.timeoutMs, force: order.force },
    });
  }

  private dispatch(nodeId: string, command: Command): boolean {
    return this.send?.(nodeId, command) ?? false;
  }
}
