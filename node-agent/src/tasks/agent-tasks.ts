// The agent's tasks as the session sees them: the supervisor running them and the outbox
// their states wait in while no session is up. Built once the node id is known (it goes
// into every container's labels), and recovered once before the first Hello, so a
// restarted agent announces the containers it re-adopted. Instances also get SSH and
// Jupyter access (access/instance-access.ts): attached before their `running` report,
// drained while stopping, removed when gone.
import type { InstanceAccess, StartTask__Output, StopTask__Output, TaskState } from '@svc/proto';
import type { Logger } from '@svc/shared';
import Docker from 'dockerode';
import type { InstanceAccessService } from '../access/instance-access.js';
import { containerName } from '../runtime/container-spec.js';
import { DockerRuntime } from '../runtime/docker-runtime.js';
import { ImageGc, ImageUseLog, type ImageGcSettings } from '../runtime/image-gc.js';
import type { RegistryPolicy } from '../runtime/image-registry.js';
import type { LogLimit } from '../runtime/log-init.js';
import type { PullDeadlineSettings } from '../runtime/pull-deadline.js';
import type { LimitSettings } from '../runtime/task-limits.js';
import type { InstanceOutbound } from '../runtime/task-network.js';
import type { TaskPts } from '../runtime/task-pts.js';
import { Outbox } from '../telemetry/health-outbox.js';
import { DEFAULT_REPLICA_SETTINGS, type ReplicaSettings } from '../replicas/replica-runner.js';
import { DEFAULT_DISK_WATCH_SETTINGS } from './disk-watch.js';
import { TaskSupervisor, type TaskReport } from './task-supervisor.js';

export class AgentTasks {
  readonly outbox = new Outbox<TaskState>(1_000);
  private readonly supervisor: TaskSupervisor;
  private recovered: Promise<void> | undefined;
  /** Reports of one instance leave in order, though attaching access takes a while. */
  private readonly reporting = new Map<string, Promise<void>>();

  private readonly access: InstanceAccessService | undefined;
  private readonly imageGc: ImageGc | undefined;

  constructor(
    nodeId: string,
    private readonly log: Logger,
    options: {
      replicas?: ReplicaSettings;
      docker?: Docker;
      access?: InstanceAccessService;
      limits?: LimitSettings;
      instanceOutbound?: InstanceOutbound;
      /** SVC_TASK_DISK_CHECK_MS; the default limit comes with `limits`. */
      diskCheckMs?: number;
      /** SVC_TASK_MAX_FILES. */
      maxFiles?: number;
      /** SVC_MAX_IMAGE_GIB in bytes. */
      maxImageBytes?: number;
      /** Why a new instance cannot start now (disk pressure); null to start it. */
      admitInstance?: () => string | null;
      /** Image garbage collection; off without it (tests that share the engine's images). */
      imageGc?: { settings: ImageGcSettings; useLogFile: string };
      /** The log limiter instances run behind (runtime/log-init.ts). */
      logLimit?: LogLimit;
      /** When a pull is given up (runtime/pull-deadline.ts). */
      pullDeadline?: PullDeadlineSettings;
      /** Why a pull must stop now (disk pressure); null to go on. */
      diskFull?: () => Promise<string | null>;
      /** SVC_TASK_DNS_QUERIES_PER_SECOND. */
      dnsQueriesPerSecond?: number;
      /** Instances' own capped /dev/pts (SVC_TASK_MAX_PTYS); absent: Docker's. */
      pts?: TaskPts;
      /** Which registries instances' images may come from (SVC_INSTANCE_PRIVATE_REGISTRIES); absent: any. */
      registryPolicy?: RegistryPolicy;
      /** Which repositories served the node which blobs (runtime/blob-sources.ts); absent: in memory. */
      blobSourcesFile?: string;
      /** The registry front's staging folder (runtime/registry-front.ts); absent: under the system's temporary folder. */
      imageStagingDir?: string;
    } = {},
  ) {
    this.access = options.access;
    const docker = options.docker ?? new Docker();
    if (options.imageGc) this.imageGc = new ImageGc(docker, new ImageUseLog(options.imageGc.useLogFile), options.imageGc.settings, log);
    const runtime = new DockerRuntime({
      nodeId,
      docker,
      ...(options.limits ? { limits: options.limits } : {}),
      ...(options.instanceOutbound ? { instanceOutbound: options.instanceOutbound } : {}),
      ...(options.maxImageBytes ? { maxImageBytes: options.maxImageBytes } : {}),
      ...(this.imageGc ? { imageUsed: (ref: string) => this.imageGc!.recordUse(ref) } : {}),
      ...(options.logLimit ? { logLimit: options.logLimit } : {}),
      ...(options.pullDeadline ? { pullDeadline: options.pullDeadline } : {}),
      ...(options.diskFull ? { diskFull: options.diskFull } : {}),
      ...(options.dnsQueriesPerSecond !== undefined ? { dnsQueriesPerSecond: options.dnsQueriesPerSecond } : {}),
      ...(options.pts ? { pts: options.pts } : {}),
      ...(options.registryPolicy ? { registryPolicy: options.registryPolicy } : {}),
      ...(options.blobSourcesFile ? { blobSourcesFile: options.blobSourcesFile } : {}),
      ...(options.imageStagingDir ? { imageStagingDir: options.imageStagingDir } : {}),
      log,
    });
    this.imageGc?.start();
    this.supervisor = new TaskSupervisor(runtime, (report) => this.reported(report), log, {
      replicas: options.replicas ?? DEFAULT_REPLICA_SETTINGS,
      ...(options.admitInstance ? { admitInstance: options.admitInstance } : {}),
      disk: {
        intervalMs: options.diskCheckMs ?? DEFAULT_DISK_WATCH_SETTINGS.intervalMs,
        defaultLimitBytes: options.limits?.defaultDiskBytes ?? DEFAULT_DISK_WATCH_SETTINGS.defaultLimitBytes,
        maxFiles: options.maxFiles ?? DEFAULT_DISK_WATCH_SETTINGS.maxFiles,
      },
    });
  }

  /** Re-adopts what runs from before an agent restart; once. A host without Docker runs no tasks. */
  recover(): Promise<void> {
    this.recovered ??= this.supervisor.recover().then(
      async (running) => {
        this.log.info({ tasks: running.map((r) => r.task_id) }, 'tasks recovered');
        const instances = running.filter((r) => r.kind === 'INSTANCE');
        await Promise.all(instances.map((r) => this.attachAccess(r.task_id)));
      },
      (err: unknown) => this.log.warn({ err }, 'could not recover tasks (is Docker running?); starting with none'),
    );
    return this.recovered;
  }

  running(): TaskState[] {
    return this.supervisor.runningTasks().map((r) => ({ ...r, access: this.access?.describe(r.task_id) ?? null }));
  }

  start(order: StartTask__Output): void {
    const kind = order.kind === 'REPLICA' ? 'replica' : 'instance';
    const setup = kind === 'instance' ? this.access?.containerSetup(order.task_id, order.ssh_authorized_keys) : undefined;
    this.supervisor.start({
      taskId: order.task_id,
      kind,
      image: order.image,
      gpuUuids: order.gpu_uuids,
      env: { ...order.env, ...setup?.env },
      labels: order.labels,
      command: order.command,
      ...(order.kind === 'REPLICA' ? { containerPort: order.container_port, healthPath: order.health_path || '/health' } : {}),
      ...(setup ? { sshAuthorizedKeys: setup.sshAuthorizedKeys } : {}),
      resources: { nanoCpus: order.nano_cpus, memoryBytes: order.memory_bytes, shmBytes: order.shm_bytes, diskBytes: order.disk_bytes, networkMbps: order.network_mbps },
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
    this.imageGc?.stop();
    this.supervisor.detach();
  }

  private reported(report: TaskReport): void {
    if (!this.access || report.kind !== 'INSTANCE') {
      this.outbox.push(report);
      return;
    }
    const id = report.task_id;
    const previous = this.reporting.get(id) ?? Promise.resolve();
    const next = previous.then(async () => {
      let access: InstanceAccess | null = null;
      switch (report.state) {
        case 'running':
          access = await this.attachAccess(id);
          break;
        case 'stopping':
          this.access!.drain(id);
          break;
        case 'exited':
        case 'failed':
        case 'gone':
          this.access!.remove(id, `instance ${id} was terminated; the connection is closed`);
          break;
      }
      this.outbox.push({ ...report, access });
    });
    this.reporting.set(id, next);
    void next.finally(() => {
      if (this.reporting.get(id) === next) this.reporting.delete(id);
    });
  }

  /** Access for a running instance; a failure is logged and the instance runs without it. */
  private async attachAccess(instanceId: string): Promise<InstanceAccess | null> {
    try {
      return await this.access!.attach(instanceId, containerName({ kind: 'instance', taskId: instanceId }));
    } catch (err) {
      this.log.error({ err, instance: instanceId }, 'could not give the instance SSH and Jupyter access');
      return null;
    }
  }
}
