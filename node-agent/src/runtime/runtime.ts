// The task runtime contract: how the agent starts, re-adopts, waits for, stops and removes
// the containers of its tasks (instances and model-server replicas). One small interface in
// the spirit of Nomad's driver plugin, so the session code never talks to Docker directly
// and a fake runtime can stand in for it in tests.
import type { TaskSpec } from './container-spec.js';
import type { DiskUsage } from './disk-usage.js';

export type { TaskSpec } from './container-spec.js';

export type TaskKind = TaskSpec['kind'];

/** Docker's container states, as `inspect` reports them. */
export type TaskState = 'created' | 'running' | 'paused' | 'restarting' | 'removing' | 'exited' | 'dead';

/** A container port published on the host (TaskSpec.publish), as Docker bound it. */
export interface PublishedPort {
  containerPort: number;
  hostIp: string;
  hostPort: number;
}

/** What the agent keeps for a task it runs. `containerId` is the `id` every other call takes. */
export interface TaskHandle {
  taskId: string;
  kind: TaskKind;
  containerId: string;
  image: string;
  state: TaskState;
  /** Null only when Docker has not recorded a start. */
  startedAt: Date | null;
  /** Published TCP ports while the container runs; empty when none (or stopped). */
  ports: PublishedPort[];
  labels: Record<string, string>;
}

/** Progress of an image pull, reported while `startTask` provisions. */
export interface PullProgress {
  image: string;
  /** 0..1, never decreasing within one pull; 1 only once the pull is finished (or the image was present). */
  fraction: number;
  /** Human-readable status of the latest step, e.g. "Downloading 348cac543f38". */
  status: string;
}

export type ProgressListener = (progress: PullProgress) => void;

export interface TaskStatus {
  containerId: string;
  /** '' (and kind 'instance') for a container that carries no task label. */
  taskId: string;
  kind: TaskKind;
  /** The `svc.node` label; '' when absent. */
  nodeId: string;
  image: string;
  state: TaskState;
  /** Null while the container has not exited. */
  exitCode: number | null;
  startedAt: Date | null;
  finishedAt: Date | null;
  oomKilled: boolean;
  /** Docker's error for the container (e.g. why it could not start); null when none. */
  error: string | null;
  labels: Record<string, string>;
  /** Published TCP ports while the container runs; empty when none (or stopped). */
  ports: PublishedPort[];
}

export interface TaskExit {
  exitCode: number;
  /** Docker's wait error message, null when none. */
  error: string | null;
}

export interface StopOptions {
  /** Grace between the signal and SIGKILL. The product default is 60 s; tests use ~1 s. */
  timeoutMs: number;
  /** Signal sent first; defaults to SIGTERM. */
  signal?: string;
  /** Skip the grace: SIGKILL at once. */
  force?: boolean;
}

/**
 * How a stop ended: `not_running` (already stopped or gone: success, stop is idempotent),
 * `exited` (the task exited on the signal within the grace), `killed` (SIGKILL was sent,
 * because of `force` or because the grace ran out).
 */
export type StopOutcome = 'not_running' | 'exited' | 'killed';

export interface DestroyOptions {
  /** Remove even while running (SIGKILL first). Without it a running task is an error. */
  force?: boolean;
}

export interface ReconcileResult {
  /** Containers removed because no wanted task owns them; taskId is null for unlabelled leftovers. */
  removed: Array<{ containerId: string; taskId: string | null }>;
}

export interface TaskRuntime {
  /**
   * Provisions a task: pulls the image when it is not present (progress through
   * `onProgress`; concurrent pulls of one image share one pull), creates the container
   * with the task's labels and starts it. Resolves as soon as the container runs.
   * Idempotent for a retried start: when this node already runs a container for the task,
   * that container's handle is returned; a stopped leftover of the task is replaced.
   * Fails with `pull_failed`, `create_failed` or `start_failed`; a container whose start
   * failed is removed before the error is thrown.
   * `signal` calls the start off (its task was stopped meanwhile): the start leaves its pull
   * (stopped unless another start waits for the same image), makes or starts no container
   * from then on (one made but not started is removed) and fails with `start_cancelled`. A
   * container it had already started is returned as usual: the caller stops it.
   */
  startTask(spec: TaskSpec, onProgress?: ProgressListener, signal?: AbortSignal): Promise<TaskHandle>;

  /**
   * Re-attach after an agent restart: every container labelled for this node that is
   * running or has exited, so the agent can re-adopt it (wait, stop, report its exit).
   * Never returns another node's containers. Created-but-never-started containers are
   * left to `reconcile`.
   */
  recoverTasks(): Promise<TaskHandle[]>;

  /**
   * Resolves with the exit code once the container is not running (at once when it has
   * already exited). Rejects with `not_found` when it is gone, or with the signal's reason
   * when `signal` aborts the wait (the container is not affected).
   */
  waitTask(id: string, signal?: AbortSignal): Promise<TaskExit>;

  /**
   * Graceful stop: send `signal` (SIGTERM), wait up to `timeoutMs` for the task to exit,
   * then SIGKILL. `force` sends SIGKILL at once. Resolves once the container is stopped.
   * Safe to repeat: a container that is already stopped or gone is `not_running`.
   */
  stopTask(id: string, options: StopOptions): Promise<StopOutcome>;

  /**
   * Removes the container (and its anonymous volumes). Safe to repeat: not found is
   * success. Without `force` a running container is a `task_running` error: stop it first.
   */
  destroyTask(id: string, options?: DestroyOptions): Promise<void>;

  /** The container's state, exit code and times; `not_found` when it does not exist. */
  inspectTask(id: string): Promise<TaskStatus>;

  /**
   * Bytes and files of the host's disk the container holds: its writable layer, its volumes
   * and the deleted files its processes still hold open (disk-usage.ts). `not_found` when gone.
   */
  diskUsage(id: string): Promise<DiskUsage>;

  /**
   * Removes every container labelled for this node whose task is not in `wanted`,
   * whatever its state (including created-but-never-started ones, left behind when a
   * create answered with an error yet Docker made the container). Another node's
   * containers are never touched. The caller includes tasks it is starting right now in
   * `wanted`. Tries every removal, then throws one error naming those that failed.
   */
  reconcile(wanted: ReadonlySet<string>): Promise<ReconcileResult>;
}

export type RuntimeErrorCode =
  | 'pull_failed' // image could not be pulled (unknown image/tag, registry down, auth)
  | 'create_failed' // Docker refused to create the container
  | 'start_failed' // the container was created but would not start
  | 'start_cancelled' // the caller called the start off (startTask's signal)
  | 'not_found' // no such container
  | 'task_running' // destroy without force of a running container
  | 'engine_error'; // any other Docker failure (engine down, timeout)

/**
 * Every runtime failure: a code the session maps to a failure reason, Docker's own
 * message, and whether the same call may succeed later (registry down: yes; unknown tag: no).
 */
export class RuntimeError extends Error {
  override readonly name = 'RuntimeError';

  constructor(
    readonly code: RuntimeErrorCode,
    message: string,
    readonly recoverable: boolean,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export const isRuntimeError = (err: unknown, code?: RuntimeErrorCode): err is RuntimeError =>
  err instanceof RuntimeError && (code === undefined || err.code === code);
