// The agent's tasks as the session sees them: the supervisor running them and the outbox
// their states wait in while no session is up. Built once the node id is known (it goes
// into every container's labels), and recovered once before the first Hello, so a
// restarted agent announces the containers it re-adopted.
import type { StartTask__Output, StopTask__Output, TaskState } from '@svc/proto';
import type { Logger } from '@svc/shared';
import Docker from 'dockerode';
import { DockerRuntime } from '../runtime/docker-runtime.js';
import { Outbox } from '../telemetry/health-outbox.js';
import { DEFAULT_REPLICA_SETTINGS, type ReplicaSettings } from '../replicas/replica-runner.js';
import { TaskSupervisor, type TaskReport } from './task-supervisor.js';

export class AgentTasks {
  readonly outbox = new Outbox<TaskState>(1_000);
  private readonly supervisor: TaskSupervisor;
  private recovered: Promise<void> | undefined;

  constructor(
    nodeId: string,
    private readonly log: Logger,
    replicas: ReplicaSettings = DEFAULT_REPLICA_SETTINGS,
    docker: Docker = new Docker(),
  ) {
    this.supervisor = new TaskSupervisor(new DockerRuntime({ nodeId, docker }), (report) => this.outbox.push(report), log, { replicas });
  }

  /** Re-adopts what runs from before an agent restart; once. A host without Docker runs no tasks. */
  recover(): Promise<void> {
    this.recovered ??= this.supervisor.recover().then(
      (running) => this.log.info({ tasks: running.map((r) => r.task_id) }, 'tasks recovered'),
      (err: unknown) => this.log.warn({ err }, 'could not recover tasks (is Docker running?); starting with none'),
    );
    return this.recovered;
  }

  running(): TaskReport[] {
    return this.supervisor.runningTasks();
  }

  start(order: StartTask__Output): void {
    this.supervisor.start({
      taskId: order.task_id,
      kind: order.kind === 'REPLICA' ? 'replica' : 'instance',
      image: order.image,
      gpuUuids: order.gpu_uuids,
      env: order.env,
      labels: order.labels,
      command: order.command,
      ...(order.kind === 'REPLICA' ? { containerPort: order.container_port, healthPath: order.health_path || '/health' } : {}),
    });
  }

  stop(order: StopTask__Output): void {
    const kind = order.task_id.startsWith('inst_') ? 'instance' : 'replica';
    this.supervisor
      .stop({ taskId: order.task_id, kind, timeoutMs: order.force ? 0 : order.timeout_ms, force: order.force })
      .catch((err: unknown) => this.log.error({ err, task: order.task_id }, 'stopping a task failed'));
  }

  /** Agent shutdown: containers keep running and are re-adopted by the next agent. */
  detach(): void {
    this.supervisor.detach();
  }
}
