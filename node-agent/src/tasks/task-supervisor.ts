// Runs the tasks the control plane orders on this node through the runtime, and reports
// each task's state back (proto TaskState): pulling (with progress), starting, running,
// stopping, exited (by itself), failed (could not start), gone (stopped and removed).
// Replicas are handed to a ReplicaRunner each (health checks, restarts with backoff;
// states unhealthy and restarting too). Reports that miss a disconnected control plane
// are not lost: the next Hello carries the running tasks, and the control plane settles
// the rest from that.
import type { Logger } from '@svc/shared';
import { ReplicaRunner, DEFAULT_REPLICA_SETTINGS, type ReplicaReport, type ReplicaSettings } from '../replicas/replica-runner.js';
import { containerName, taskSpecFromLabels, type TaskSpec } from '../runtime/container-spec.js';
import { isRuntimeError, type TaskHandle, type TaskRuntime } from '../runtime/runtime.js';
import { DEFAULT_DISK_WATCH_SETTINGS, DiskWatch, type DiskWatchSettings } from './disk-watch.js';

export type ReportedState = 'pulling' | 'starting' | 'running' | 'unhealthy' | 'restarting' | 'stopping' | 'exited' | 'failed' | 'gone';

/** The shape of proto TaskState (snake_case as it goes on the wire). */
export interface TaskReport {
  task_id: string;
  kind: 'INSTANCE' | 'REPLICA';
  state: ReportedState;
  message: string;
  exit_code: number;
  pull_progress: number;
  endpoint: string;
  at_ms: number;
  /** exited/gone: when the container stopped, as Docker recorded it (State.FinishedAt); 0 when unknown. */
  stopped_at_ms: number;
}

export interface StartOrder extends TaskSpec {
  /** Replicas: the server's port inside the container (published on the replica host) and its health path. */
  containerPort?: number;
}

export interface TaskSupervisorOptions {
  now?: () => number;
  replicas?: ReplicaSettings;
  /** Instances' disk limits (disk-watch.ts). */
  disk?: DiskWatchSettings;
  /** Why a new instance cannot start on this node now (disk pressure); null to start it. */
  admitInstance?: () => string | null;
}

export interface StopOrder {
  taskId: string;
  kind: TaskSpec['kind'];
  timeoutMs: number;
  force: boolean;
}

interface Tracked {
  kind: TaskSpec['kind'];
  handle: TaskHandle | null;
  /** Settles when the start attempt has finished, successfully or not. */
  starting: Promise<void>;
  /** Calls the start in progress off (a stop came first): its pull is left, no container is made. */
  cancelStart: AbortController;
  stopping: boolean;
  /** The stop in flight: a repeated order joins it (keeping its deadline) instead of starting another grace. */
  stop?: Promise<void>;
  watch: AbortController;
}

interface ReportDetail {
  message?: string;
  exitCode?: number;
  progress?: number;
  /** ms since the epoch; exited/gone only. */
  stoppedAt?: number;
}

/** Pull progress is reported when it moved this much, so a fast pull is not a flood. */
const PROGRESS_STEP = 0.05;

export class TaskSupervisor {
  private readonly tasks = new Map<string, Tracked>();
  private readonly replicas = new Map<string, ReplicaRunner>();
  private readonly now: () => number;
  private readonly replicaSettings: ReplicaSettings;
  private readonly disk: DiskWatch;
  private readonly admitInstance: () => string | null;

  constructor(
    private readonly runtime: TaskRuntime,
    private readonly report: (report: TaskReport) => void,
    private readonly log: Pick<Logger, 'info' | 'warn' | 'error'>,
    options: TaskSupervisorOptions = {},
  ) {
    this.now = options.now ?? Date.now;
    this.replicaSettings = options.replicas ?? DEFAULT_REPLICA_SETTINGS;
    this.admitInstance = options.admitInstance ?? (() => null);
    this.disk = new DiskWatch((id) => this.runtime.diskUsage(id), (taskId, message) => this.evict(taskId, message), log, options.disk ?? DEFAULT_DISK_WATCH_SETTINGS);
  }

  /** After an agent restart: re-adopt running containers; report those that exited meanwhile. */
  async recover(): Promise<TaskReport[]> {
    const running: TaskReport[] = [];
    for (const handle of await this.runtime.recoverTasks()) {
      const replicaSpec = handle.kind === 'replica' ? taskSpecFromLabels(handle.labels) : null;
      if (handle.state === 'running' && replicaSpec) {
        const runner = this.replicaRunner(replicaSpec);
        await runner.adopt(handle);
        running.push(this.fromReplica(runner.taskId, runner.current()));
      } else if (handle.state === 'running' && handle.kind === 'instance') {
        this.track(handle.taskId, handle.kind, handle);
        running.push(this.make(handle.taskId, handle.kind, 'running', {}));
      } else {
        const status = await this.runtime.inspectTask(handle.containerId);
        const message = handle.state === 'running' ? 'removed: a replica container without a readable spec cannot be supervised' : 'the container exited while the agent was away';
        this.emit(handle.taskId, handle.kind, 'exited', { exitCode: status.exitCode ?? -1, message, stoppedAt: status.finishedAt?.getTime() ?? this.now() });
        await this.runtime.destroyTask(handle.containerId, { force: true });
      }
    }
    // Containers created but never started (a create that failed half-way) belong to nobody,
    // and so does a replica container without a readable spec (it cannot be restarted).
    const removed = await this.runtime.reconcile(new Set(running.map((r) => r.task_id)));
    if (removed.removed.length > 0) this.log.info({ removed: removed.removed }, 'removed containers no task owns');
    return running;
  }

  /** What this node runs now, for Hello.running_tasks (replicas with their state and endpoint). */
  runningTasks(): TaskReport[] {
    const instances = [...this.tasks.entries()]
      .filter(([, t]) => t.handle !== null && !t.stopping)
      .map(([taskId, t]) => this.make(taskId, t.kind, 'running', {}));
    const replicas = [...this.replicas.values()].filter((r) => !r.stopping).map((r) => this.fromReplica(r.taskId, r.current()));
    return [...instances, ...replicas];
  }

  /** Starts a task; a repeated order for a task already here is ignored (idempotent). */
  start(order: StartOrder): void {
    if (this.tasks.has(order.taskId) || this.replicas.has(order.taskId)) return;
    if (order.kind === 'replica') {
      if (!order.containerPort) {
        this.emit(order.taskId, 'replica', 'failed', { message: 'a replica order needs container_port (the control plane speaks an older protocol)' });
        return;
      }
      const { containerPort, ...spec } = order;
      this.replicaRunner({ ...spec, publish: { containerPort, hostIp: this.replicaSettings.host } }).start();
      return;
    }
    // Refused before anything is pulled or written: the control plane fails it without a charge.
    const refusal = this.admitInstance();
    if (refusal) {
      this.emit(order.taskId, order.kind, 'failed', { message: refusal });
      return;
    }
    const tracked = this.track(order.taskId, order.kind, null);
    tracked.starting = this.provision(order, tracked);
  }

  /**
   * Stops and removes a task, gracefully unless forced; safe to repeat and for unknown
   * tasks. A repeated order for an instance already stopping joins the stop in flight, so
   * the first order's deadline holds; a forced one kills at once. An instance still
   * starting has its start called off (its pull left) and whatever container the start
   * made is killed at once, whatever the order's grace: it never ran for its tenant as
   * ready, and nothing of it is billed.
   */
  async stop(order: StopOrder): Promise<void> {
    const runner = this.replicas.get(order.taskId);
    if (runner) {
      try {
        await runner.stop({ timeoutMs: order.timeoutMs, force: order.force });
      } finally {
        this.replicas.delete(order.taskId);
      }
      return;
    }
    const tracked = this.tasks.get(order.taskId);
    if (tracked?.stop) {
      if (order.force && tracked.handle) {
        await this.runtime.stopTask(tracked.handle.containerId, { timeoutMs: 0, force: true }).catch((err: unknown) => {
          if (!isRuntimeError(err, 'not_found')) throw err;
        });
      }
      return tracked.stop;
    }
    const stopping = this.stopContainer(order, tracked);
    if (tracked) tracked.stop = stopping;
    return stopping;
  }

  /**
   * An instance over its disk limit: killed at once (every second of grace is more disk
   * filled) and removed; `gone` says why, so the control plane can tell its owner.
   */
  private evict(taskId: string, message: string): void {
    const tracked = this.tasks.get(taskId);
    if (!tracked?.handle || tracked.stop) return;
    this.log.warn({ task: taskId }, message);
    tracked.stop = this.stopContainer({ taskId, kind: tracked.kind, timeoutMs: 0, force: true }, tracked, message);
    tracked.stop.catch((err: unknown) => this.log.error({ task: taskId, err }, 'stopping an instance over its disk limit failed'));
  }

  /** `why`: the agent stopped it on its own (disk limit); otherwise the control plane asked. */
  private async stopContainer(order: StopOrder, tracked: Tracked | undefined, why?: string): Promise<void> {
    this.disk.forget(order.taskId);
    // Still starting: it was never reported running, so its tenant had no use of it yet.
    const unstarted = tracked !== undefined && tracked.handle === null;
    if (tracked) {
      tracked.stopping = true;
      tracked.watch.abort();
      tracked.cancelStart.abort();
      await tracked.starting;
    }
    this.emit(order.taskId, order.kind, 'stopping', {});
    const id = tracked?.handle?.containerId ?? containerName({ kind: order.kind, taskId: order.taskId });
    let exitCode = 0;
    let stoppedAt: number | undefined;
    try {
      await this.runtime.stopTask(id, unstarted ? { timeoutMs: 0, force: true } : { timeoutMs: order.timeoutMs, force: order.force });
      const status = await this.runtime.inspectTask(id);
      exitCode = status.exitCode ?? 0;
      stoppedAt = status.finishedAt?.getTime();
      await this.runtime.destroyTask(id, { force: true });
    } catch (err) {
      if (!isRuntimeError(err, 'not_found')) throw err;
    } finally {
      if (this.tasks.get(order.taskId) === tracked) this.tasks.delete(order.taskId);
    }
    // No container found: when it stopped is unknown (0), and the control plane bills to its last contact.
    this.emit(order.taskId, order.kind, 'gone', { exitCode, ...(stoppedAt !== undefined ? { stoppedAt } : {}), ...(why ? { message: why } : {}) });
  }

  /** Stops watching (agent shutdown); containers keep running and are re-adopted next start. */
  detach(): void {
    this.disk.stop();
    for (const t of this.tasks.values()) t.watch.abort();
    for (const r of this.replicas.values()) r.detach();
  }

  private replicaRunner(spec: TaskSpec): ReplicaRunner {
    const runner = new ReplicaRunner(spec, {
      runtime: this.runtime,
      report: (r) => this.report(this.fromReplica(spec.taskId, r)),
      log: this.log,
      settings: this.replicaSettings,
      now: this.now,
    });
    this.replicas.set(spec.taskId, runner);
    return runner;
  }

  private fromReplica(taskId: string, r: ReplicaReport): TaskReport {
    return { ...this.make(taskId, 'replica', r.state, { message: r.message, exitCode: r.exitCode, progress: r.progress }), endpoint: r.endpoint };
  }

  private track(taskId: string, kind: TaskSpec['kind'], handle: TaskHandle | null): Tracked {
    const tracked: Tracked = { kind, handle, starting: Promise.resolve(), cancelStart: new AbortController(), stopping: false, watch: new AbortController() };
    this.tasks.set(taskId, tracked);
    if (handle) this.watchExit(taskId, tracked);
    return tracked;
  }

  private async provision(order: StartOrder, tracked: Tracked): Promise<void> {
    let reported = -1;
    this.emit(order.taskId, order.kind, 'pulling', { progress: 0 });
    try {
      const handle = await this.runtime.startTask(
        order,
        (p) => {
          if (tracked.stopping) return;
          if (p.fraction - reported >= PROGRESS_STEP || (p.fraction === 1 && reported < 1)) {
            reported = p.fraction;
            this.emit(order.taskId, order.kind, 'pulling', { progress: p.fraction, message: p.status });
          }
        },
        tracked.cancelStart.signal,
      );
      tracked.handle = handle;
      if (tracked.stopping) return;
      this.emit(order.taskId, order.kind, 'running', {});
      this.watchExit(order.taskId, tracked);
    } catch (err) {
      // Stopped meanwhile: the stop reports the task gone, not a failed start.
      if (tracked.stopping) return;
      this.tasks.delete(order.taskId);
      const message = isRuntimeError(err) ? `${err.code.replace('_', ' ')}: ${err.message}` : String(err);
      this.log.warn({ task: order.taskId, err }, 'task failed to start');
      this.emit(order.taskId, order.kind, 'failed', { message });
    }
  }

  /** A task that exits by itself is reported and its container removed; an instance is held to its disk limit meanwhile. */
  private watchExit(taskId: string, tracked: Tracked): void {
    const id = tracked.handle!.containerId;
    if (tracked.kind === 'instance') this.disk.watch(taskId, tracked.handle!);
    this.runtime.waitTask(id, tracked.watch.signal).then(
      async (exit) => {
        if (tracked.stopping) return;
        this.disk.forget(taskId);
        this.tasks.delete(taskId);
        const finishedAt = await this.runtime.inspectTask(id).then((status) => status.finishedAt?.getTime(), () => undefined);
        this.emit(taskId, tracked.kind, 'exited', { exitCode: exit.exitCode, message: exit.error ?? `exited with code ${exit.exitCode}`, stoppedAt: finishedAt ?? this.now() });
        await this.runtime.destroyTask(id, { force: true }).catch((err: unknown) => this.log.error({ task: taskId, err }, 'removing an exited container failed'));
      },
      (err: unknown) => {
        if (tracked.watch.signal.aborted || tracked.stopping) return;
        this.log.error({ task: taskId, err }, 'waiting for a task failed');
      },
    );
  }

  private make(taskId: string, kind: TaskSpec['kind'], state: ReportedState, detail: ReportDetail): TaskReport {
    return {
      task_id: taskId,
      kind: kind === 'instance' ? 'INSTANCE' : 'REPLICA',
      state,
      message: detail.message ?? '',
      exit_code: detail.exitCode ?? 0,
      pull_progress: detail.progress ?? 0,
      endpoint: '',
      at_ms: this.now(),
      stopped_at_ms: detail.stoppedAt ?? 0,
    };
  }

  private emit(taskId: string, kind: TaskSpec['kind'], state: ReportedState, detail: ReportDetail): void {
    this.report(this.make(taskId, kind, state, detail));
  }
}
