// The TaskRuntime over the local Docker engine (dockerode): images through image-pulls.ts, create
// from buildContainerSpec, start, graceful stop, removal, re-adoption and the sweep of
// containers nobody wants. Everything it makes is labelled with this node's id, and it
// only ever lists, re-adopts or sweeps containers carrying that label. Each task's
// container runs alone on a network of its own (task-network.ts), made before the
// container and removed after it.
import { processEnded } from '../access/process-tree.js';
import Docker from 'dockerode';
import type { Logger } from '@svc/shared';
import { LABEL_NODE, buildContainerSpec, containerName, taskFromLabels, type HostCapabilities, type TaskSpec } from './container-spec.js';
import {
  dockerMessage,
  dockerStatus,
  engineError,
  isNotFound,
  isNotRunning,
  isRemovalInProgress,
  notFound,
  taskFailed,
} from './docker-errors.js';
import { allocatedBytes, deletedOpenFiles, devicesOf, fileCount, formatBytes, type DiskUsage } from './disk-usage.js';
import { ContainerFs, FsError } from '../access/container-fs.js';
import { commandBehindLimiter, envValue, lookUpProgram, type StatResult } from './command-lookup.js';
import { LOG_INIT_TARGET, type ImageCommand, type LogLimit } from './log-init.js';
import { listsNvidiaRuntime } from './nvidia-runtime.js';
import { shapeFromContainer, shapeToContainer } from './task-bandwidth.js';
import { dnsLimitRules, embeddedDnsRefusal } from './task-dns-limit.js';
import { registryRefusal, type RegistryPolicy } from './image-registry.js';
import { localImageName, withDefaultTag } from './image-reference.js';
import { DockerAnswerTooLarge, dockerJson, MAX_IMAGE_ANSWER_BYTES } from './docker-json.js';
import { imageConfigProblem, type ImageConfig } from './image-config-check.js';
import { imageIdProblem } from '@svc/shared/image-id';
import { filterNamespace } from './task-namespace-filter.js';
import { ownSubnetRules, type OwnNetwork } from './task-own-subnet.js';
import { detachPts, mountPts, ptsDir, sweepPts, unmountPts, type TaskPts } from './task-pts.js';
import { containerLimits, DEFAULT_LIMIT_SETTINGS, type LimitSettings } from './task-limits.js';
import { diskUnder } from '../host-facts/block-device.js';
import { unlimitedForContainers } from '../host-facts/shared-rlimits.js';
import { limitRunningSocketMemory, limitSocketMemory, memoryCgroupOf, needsSocketLimits, releaseSocketCgroup, type EngineCgroups } from './socket-memory.js';
import { bridgeName, buildNetworkSpec, networkName, type InstanceOutbound } from './task-network.js';
import type { PullCoordinator } from './pull-coordinator.js';
import { ImagePulls } from './image-pulls.js';
import type { PullDeadlineSettings } from './pull-deadline.js';
import {
  RuntimeError,
  type DestroyOptions,
  type PublishedPort,
  type ProgressListener,
  type ReconcileResult,
  type StopOptions,
  type StopOutcome,
  type TaskExit,
  type TaskHandle,
  type TaskRuntime,
  type TaskState,
  type TaskStatus,
} from './runtime.js';

export { MAX_IMAGE_ANSWER_BYTES };

/** A coarse shape check; the control plane validates references fully before ordering a task. */
const IMAGE_REFERENCE_SHAPE = /^[A-Za-z0-9][A-Za-z0-9._:/@+\-\[\]]{0,511}$/;
/** What Docker takes in a container name (the task id is part of it, and of host paths the agent makes). */
const TASK_ID_SHAPE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,199}$/;

export interface DockerRuntimeOptions {
  /** This node's id: the `svc.node` label on everything the runtime creates or adopts. */
  nodeId: string;
  /** Defaults to the engine on /var/run/docker.sock. */
  docker?: Docker;
  /** Skips detection; otherwise `docker info` is asked once, on the first start. */
  nvidiaRuntime?: boolean;
  /** How long to wait for a container to die after SIGKILL before calling it an engine error. */
  killTimeoutMs?: number;
  /** Reserves and the pids limit (agent settings); defaults: DEFAULT_LIMIT_SETTINGS. */
  limits?: LimitSettings;
  /** Whether instance networks reach the internet (SVC_INSTANCE_OUTBOUND); default internet. */
  instanceOutbound?: InstanceOutbound;
  /** A pull whose layers add up to more (compressed) is cut off (SVC_MAX_IMAGE_GIB); default 100 GiB. */
  maxImageBytes?: number;
  /**
   * Told each image a task starts with, once it is present, and the ID of an instance's
   * image its name moved away from (image-gc.ts keeps the node's disk from filling with them).
   */
  imageUsed?: (ref: string) => void;
  /** The log limiter instances run behind (log-init.ts); absent: none. */
  logLimit?: LogLimit;
  /** When a pull is given up (SVC_PULL_STALL_SECONDS, SVC_PULL_TIMEOUT_MINUTES); default DEFAULT_PULL_DEADLINE. */
  pullDeadline?: PullDeadlineSettings;
  /**
   * Asked every second while a pull runs: why it must stop now (the disk holding Docker's
   * data is nearly full), null to go on. A layer can unpack to a thousand times its
   * compressed size, so the compressed cap alone lets a tenant's image fill the disk.
   */
  diskFull?: () => Promise<string | null>;
  /** Queries a second an instance may send Docker's embedded DNS (SVC_TASK_DNS_QUERIES_PER_SECOND); 0: no cap. Default DEFAULT_DNS_QUERIES_PER_SECOND. */
  dnsQueriesPerSecond?: number;
  /** Instances' own capped /dev/pts (SVC_TASK_MAX_PTYS, under the data dir); absent: Docker's, uncapped. */
  pts?: TaskPts;
  /** On cgroup v1 under cgroupfs, instances' TCP buffers count against a limit the agent sets (socket-memory.ts); default true. */
  socketLimits?: boolean;
  /** Which registries instances' images may come from (image-registry.ts); absent: any. The agent always sets it. */
  registryPolicy?: RegistryPolicy;
  /** Where the repositories that served each blob are kept (blob-sources.ts); absent: in memory. */
  blobSourcesFile?: string;
  /** The registry front's staging folder, emptied when it starts (SVC_AGENT_DATA_DIR/image-staging); absent: a folder under the system's temporary folder that runtimes share, each pull in a folder of its own. */
  imageStagingDir?: string;
  /** Where the registry front says what it refused and why (the tenant reads less). */
  log?: Logger;
}

export const DEFAULT_DNS_QUERIES_PER_SECOND = 100;

export const DEFAULT_PULL_DEADLINE: PullDeadlineSettings = { stallMs: 120_000, timeoutMs: 3_600_000 };

export const DEFAULT_MAX_IMAGE_BYTES = 100 * 1024 ** 3;

/** An image's Entrypoint or Cmd: a list, a string (shell form, already wrapped by the builder) or nothing. */
const asArgs = (value: string[] | string | null | undefined): string[] => (Array.isArray(value) ? value : value ? [value] : []);

// Docker reports never-set times as the zero time.
const parseDockerTime = (value: string | undefined): Date | null =>
  !value || value.startsWith('0001-01-01') ? null : new Date(value);

export class DockerRuntime implements TaskRuntime {
  readonly docker: Docker;
  readonly nodeId: string;
  private readonly images: ImagePulls;
  /** Shared pulls of instances' images (through the registry front), each to the image's ID; exposed so tests can count real pulls. */
  get pulls(): PullCoordinator<string> {
    return this.images.instances;
  }
  private readonly nvidiaRuntime: boolean | undefined;
  private readonly logLimit: LogLimit | undefined;
  private readonly killTimeoutMs: number;
  private readonly limits: LimitSettings;
  private readonly instanceOutbound: InstanceOutbound;
  private readonly imageUsed: ((ref: string) => void) | undefined;
  private readonly dnsQueriesPerSecond: number;
  private readonly pts: TaskPts | undefined;
  private readonly socketLimits: boolean;
  private readonly registryPolicy: RegistryPolicy | undefined;
  private hostCapabilities: Promise<HostCapabilities> | null = null;

  constructor(options: DockerRuntimeOptions) {
    this.docker = options.docker ?? new Docker();
    this.nodeId = options.nodeId;
    this.killTimeoutMs = options.killTimeoutMs ?? 10_000;
    this.limits = options.limits ?? DEFAULT_LIMIT_SETTINGS;
    this.instanceOutbound = options.instanceOutbound ?? 'internet';
    this.imageUsed = options.imageUsed;
    this.dnsQueriesPerSecond = options.dnsQueriesPerSecond ?? DEFAULT_DNS_QUERIES_PER_SECOND;
    this.nvidiaRuntime = options.nvidiaRuntime;
    this.logLimit = options.logLimit;
    this.pts = options.pts;
    this.socketLimits = options.socketLimits ?? true;
    this.registryPolicy = options.registryPolicy;
    this.images = new ImagePulls({
      docker: this.docker,
      pullDeadline: options.pullDeadline ?? DEFAULT_PULL_DEADLINE,
      maxImageBytes: options.maxImageBytes ?? DEFAULT_MAX_IMAGE_BYTES,
      diskFull: options.diskFull,
      registryPolicy: options.registryPolicy,
      blobSourcesFile: options.blobSourcesFile,
      stagingDir: options.imageStagingDir,
      imageUnnamed: options.imageUsed,
      log: options.log,
    });
  }

  async startTask(given: TaskSpec, onProgress?: ProgressListener, signal?: AbortSignal): Promise<TaskHandle> {
    // The agent does not trust its input: an empty or spaced reference makes docker-modem
    // follow a redirect to a bogus host and throw outside any promise.
    if (!TASK_ID_SHAPE.test(given.taskId) || !IMAGE_REFERENCE_SHAPE.test(given.image)) {
      throw new RuntimeError('create_failed', `invalid task: task id "${given.taskId}", image reference "${given.image}"`, false);
    }
    const byId = imageIdProblem(given.image);
    if (byId) throw new RuntimeError('pull_failed', byId, false);
    // Docker never reads a tagged name as a prefix of an image's ID (image-reference.ts).
    const spec: TaskSpec = { ...given, image: withDefaultTag(given.image) };
    if (spec.kind === 'instance' && this.registryPolicy) {
      const refused = await registryRefusal(spec.image, this.registryPolicy);
      if (refused) throw new RuntimeError('pull_failed', refused, false);
    }
    const host = await this.host();
    const present = await this.ensureImage(spec, onProgress, signal);
    // Called off during the pull (or as it ended): nothing is made for a stopped task.
    if (signal?.aborted) throw startCancelled(spec);
    this.imageUsed?.(dockerName(spec));
    if (spec.kind === 'instance') this.checkImageConfig(present!);
    await this.ensureNetwork(spec);
    const { networkMbps, memoryBytes } = containerLimits(spec.resources, host.capacity, host.limits, spec.kind, spec.gpuUuids.length);
    let container: Docker.Container;
    try {
      if (networkMbps > 0) await this.shapeBridge(spec, networkMbps);
      if (spec.kind === 'instance' && host.pts) await this.mountPts(spec, host.pts);
      container = await this.createContainer(spec, host, present);
    } catch (err) {
      // reconcile sweeps them otherwise
      await this.removeNetwork(spec).catch(() => undefined);
      await this.releasePts(spec).catch(() => undefined);
      throw err;
    }
    if (spec.kind === 'instance' && host.logLimit) {
      const missing = await this.missingCommand(container);
      if (missing) throw await this.discardUnstarted(container.id, spec, new RuntimeError('start_failed', missing, false));
    }
    if (spec.kind === 'instance' && host.socketLimits) {
      try {
        await limitSocketMemory(container.id, memoryBytes);
      } catch (err) {
        throw await this.discardUnstarted(container.id, spec, taskFailed('start_failed', `limit the socket memory of ${containerName(spec)} (${memoryCgroupOf(container.id)})`, err));
      }
    }
    // The last moment a stop can keep the container from running at all.
    if (signal?.aborted) throw await this.discardUnstarted(container.id, spec, startCancelled(spec));
    try {
      await container.start();
    } catch (err) {
      // 304: already started (a retried start that adopted a running container).
      if (dockerStatus(err) !== 304) throw await this.discardUnstarted(container.id, spec, err);
    }
    // Running, the container holds its /dev/pts itself; on failure destroy or reconcile unmounts it.
    if (spec.kind === 'instance' && host.pts) await detachPts(ptsDir(host.pts.root, containerName(spec))).catch(() => undefined);
    // What needs the container's network namespace, which exists once it runs. Done again
    // on a retried start: both replace what was there, so it comes out the same.
    const inNamespace: Array<(started: Docker.ContainerInspectInfo) => Promise<void>> = [];
    if (networkMbps > 0) inNamespace.push((started) => shapeFromContainer(started.State.Pid, networkMbps));
    if (spec.kind === 'instance') inNamespace.push((started) => filterNamespace(started.State.Pid, this.instanceFilterRules(started)));
    if (inNamespace.length > 0) await this.setUpStarted(container, spec, inNamespace);
    return this.handleOf(await this.inspectTask(container.id));
  }

  async recoverTasks(): Promise<TaskHandle[]> {
    const containers = await this.listOwnContainers();
    const host = await this.host();
    const handles: TaskHandle[] = [];
    for (const c of containers) {
      const task = taskFromLabels(c.Labels);
      if (!task || (c.State !== 'running' && c.State !== 'exited')) continue;
      try {
        handles.push(this.handleOf(await this.inspectTask(c.Id)));
        if (task.kind === 'instance' && c.State === 'running' && host.socketLimits) await this.limitAdoptedSockets(c.Id);
      } catch (err) {
        // Removed between list and inspect: nothing to adopt.
        if (!(err instanceof RuntimeError && err.code === 'not_found')) throw err;
      }
    }
    return handles;
  }

  /** An instance started before the agent limited sockets (an upgrade): its new sockets count from now on. */
  private async limitAdoptedSockets(id: string): Promise<void> {
    const info = await this.docker
      .getContainer(id)
      .inspect()
      .catch(() => null);
    const memory = info?.HostConfig.Memory;
    if (info && memory) await limitRunningSocketMemory(info.Id, memory);
  }

  async waitTask(id: string, signal?: AbortSignal): Promise<TaskExit> {
    try {
      const result = (await this.docker
        .getContainer(id)
        .wait({ condition: 'not-running', ...(signal ? { abortSignal: signal } : {}) })) as {
        StatusCode: number;
        Error?: { Message?: string } | null;
      };
      return { exitCode: result.StatusCode, error: result.Error?.Message || null };
    } catch (err) {
      if (signal?.aborted) throw signal.reason ?? err;
      if (isNotFound(err)) throw notFound(id, err);
      throw engineError(`wait for ${id}`, err);
    }
  }

  async stopTask(id: string, options: StopOptions): Promise<StopOutcome> {
    const container = this.docker.getContainer(id);
    // Our own signal + wait rather than `container.stop({t})`: any signal, millisecond
    // graces, and one code path for SIGTERM and the rest.
    if (!options.force) {
      if (!(await this.signal(container, options.signal ?? 'SIGTERM'))) return 'not_running';
      if (await this.exitsWithin(container, options.timeoutMs)) return 'exited';
    }
    if (!(await this.signal(container, 'SIGKILL'))) return options.force ? 'not_running' : 'exited';
    if (!(await this.exitsWithin(container, this.killTimeoutMs))) {
      throw new RuntimeError('engine_error', `${id} still runs ${this.killTimeoutMs} ms after SIGKILL`, true);
    }
    return 'killed';
  }

  async destroyTask(id: string, options: DestroyOptions = {}): Promise<void> {
    let task: Pick<TaskSpec, 'kind' | 'taskId'> | null;
    let fullId: string;
    try {
      const info = await this.docker.getContainer(id).inspect();
      task = taskFromLabels(info.Config.Labels);
      fullId = info.Id;
    } catch (err) {
      if (isNotFound(err)) return;
      throw engineError(`inspect ${id}`, err);
    }
    try {
      await this.docker.getContainer(id).remove({ force: options.force ?? false, v: true });
    } catch (err) {
      if (isNotFound(err) || isRemovalInProgress(err)) return;
      if (dockerStatus(err) === 409) {
        throw new RuntimeError('task_running', `${id} is running; stop it or destroy with force: ${dockerMessage(err)}`, false, {
          cause: err,
        });
      }
      throw engineError(`remove ${id}`, err);
    }
    if (task) {
      await this.removeNetwork(task);
      await this.releasePts(task);
    }
    // The memory cgroup the agent made for an instance that never started (runc removes
    // the cgroups of those that ran); none there is the usual case.
    if (task?.kind === 'instance') await releaseSocketCgroup(fullId);
  }

  async inspectTask(id: string): Promise<TaskStatus> {
    let info: Docker.ContainerInspectInfo;
    try {
      info = await this.docker.getContainer(id).inspect();
    } catch (err) {
      if (isNotFound(err)) throw notFound(id, err);
      throw engineError(`inspect ${id}`, err);
    }
    const labels = info.Config.Labels ?? {};
    const task = taskFromLabels(labels);
    const state = info.State.Status as TaskState;
    return {
      containerId: info.Id,
      taskId: task?.taskId ?? '',
      kind: task?.kind ?? 'instance',
      nodeId: labels[LABEL_NODE] ?? '',
      image: info.Config.Image,
      state,
      exitCode: state === 'exited' || state === 'dead' ? info.State.ExitCode : null,
      startedAt: parseDockerTime(info.State.StartedAt),
      finishedAt: parseDockerTime(info.State.FinishedAt),
      oomKilled: info.State.OOMKilled,
      error: info.State.Error || null,
      labels,
      ports: publishedPorts(info.NetworkSettings?.Ports),
    };
  }

  async diskUsage(id: string): Promise<DiskUsage> {
    const container = this.docker.getContainer(id);
    let info: Docker.ContainerInspectInfo;
    try {
      info = await container.inspect();
    } catch (err) {
      if (isNotFound(err)) throw notFound(id, err);
      throw engineError(`inspect ${id}`, err);
    }
    const volumes = (info.Mounts ?? []).filter((m) => m.Type === 'volume' && m.Source).map((m) => m.Source);
    // overlay2's directories; the typings know only devicemapper's fields.
    const upperDir = (info.GraphDriver?.Data as Record<string, string> | undefined)?.['UpperDir'];
    // Another storage driver than overlay2: the engine walks the layer itself (apparent size).
    const layer = upperDir ? 0 : await this.layerSize(container);
    // /etc/hosts, /etc/hostname and /etc/resolv.conf are files Docker keeps in its own
    // directory on the same disk and mounts writable: root in the container can fill them
    // (measured: 70 MB written into them, none of it in the writable layer).
    const etcFiles = [info.HostsPath, info.HostnamePath, info.ResolvConfPath].filter((path): path is string => typeof path === 'string' && path !== '');
    const walked = [...(upperDir ? [upperDir] : []), ...volumes, ...etcFiles];
    // One walk after the other: the disk is read by one `du` at a time.
    const bytes = await allocatedBytes(walked);
    const files = await fileCount(walked);
    const held = info.State.Running ? await this.deletedOpen(container, info.State.Pid, volumes) : { bytes: 0, files: 0 };
    return { bytes: layer + bytes + held.bytes, files: files + held.files };
  }

  async reconcile(wanted: ReadonlySet<string>): Promise<ReconcileResult> {
    const removed: ReconcileResult['removed'] = [];
    const failures: string[] = [];
    for (const c of await this.listOwnContainers()) {
      const taskId = taskFromLabels(c.Labels)?.taskId ?? null;
      if (taskId !== null && wanted.has(taskId)) continue;
      try {
        await this.destroyTask(c.Id, { force: true });
        removed.push({ containerId: c.Id, taskId });
      } catch (err) {
        failures.push(`${c.Id}: ${err instanceof Error ? err.message : String(err)}`);
      }
    }
    // Devpts mounts of instances nobody wants whose containers are gone: left by a crash
    // between removal and unmount (a wanted instance may be between its mount and its create).
    if (this.pts) {
      const keep = new Set([...wanted].map((taskId) => containerName({ kind: 'instance', taskId })));
      for (const c of await this.listOwnContainers()) for (const name of c.Names ?? []) keep.add(name.replace(/^\//, ''));
      await sweepPts(this.pts.root, keep).catch((err: unknown) => failures.push(`devpts under ${this.pts!.root}: ${(err as Error).message}`));
    }
    // Networks of tasks nobody wants: left by a crash between container and network removal.
    for (const n of await this.listOwnNetworks()) {
      const task = taskFromLabels(n.Labels);
      if (task && wanted.has(task.taskId)) continue;
      try {
        await this.docker.getNetwork(n.Id).remove();
      } catch (err) {
        if (!isNotFound(err)) failures.push(`network ${n.Name}: ${dockerMessage(err)}`);
      }
    }
    if (failures.length > 0) {
      throw new RuntimeError('engine_error', `reconcile could not remove ${failures.join('; ')}`, true);
    }
    return { removed };
  }

  // --- provisioning ---------------------------------------------------------

  /** The engine's CPUs, memory and runtimes, asked once (`docker info`). */
  private host(): Promise<HostCapabilities> {
    if (!this.hostCapabilities) {
      const detecting = this.docker.info().then(
        async (info: { NCPU?: number; MemTotal?: number; Runtimes?: Record<string, unknown>; DockerRootDir?: string } & EngineCgroups) => {
          // Not found (an engine on another host, btrfs, ZFS): disk bandwidth goes unlimited.
          const disk = info.DockerRootDir ? await diskUnder(info.DockerRootDir).catch(() => undefined) : undefined;
          const socketLimits = this.socketLimits && (await needsSocketLimits(info));
          const unlimitedRlimits = await unlimitedForContainers();
          return {
            nodeId: this.nodeId,
            nvidiaRuntime: this.nvidiaRuntime ?? listsNvidiaRuntime(info),
            capacity: { cpus: info.NCPU ?? 1, memoryBytes: info.MemTotal ?? 0 },
            limits: this.limits,
            ...(this.logLimit ? { logLimit: this.logLimit } : {}),
            ...(this.pts ? { pts: this.pts } : {}),
            ...(disk ? { disk } : {}),
            ...(socketLimits ? { socketLimits } : {}),
            unlimitedRlimits,
          };
        },
        (err: unknown) => {
          this.hostCapabilities = null; // ask again next time
          throw engineError('docker info', err);
        },
      );
      this.hostCapabilities = detecting;
    }
    return this.hostCapabilities;
  }

  /**
   * A replica's image is pulled only when missing. An instance's is always pulled (what
   * Kubernetes calls Always), however it got on the node, and then read with a bound
   * (instanceImage): a present copy proves nothing about what the instance may have. One
   * the operator pulled with credentials ran for a tenant who had none, and Docker 20.10
   * skips a pull whose image config is already on the node, recording the tenant's
   * repository as where it came from: a registry serving a manifest that names the ID of
   * the provider's own image got the tenant that image, its layers never asked for.
   */
  private async ensureImage(spec: TaskSpec, onProgress?: ProgressListener, signal?: AbortSignal): Promise<Docker.ImageInspectInfo | undefined> {
    const { image } = spec;
    if (spec.kind === 'instance') {
      // Called off, the start leaves the shared pull: stopped when no other start waits for it.
      const id = await this.images.instances.pull(image, onProgress, signal).catch((err: unknown) => {
        if (signal?.aborted) throw startCancelled(spec);
        throw err;
      });
      // By the ID the pull proved: the name may be given to another image meanwhile (another
      // instance's pull of the same name, or of a tag shaped like a digest's local name).
      return this.instanceImage(id, localImageName(image));
    }
    try {
      const present = await this.docker.getImage(image).inspect();
      onProgress?.({ image, fraction: 1, status: 'Image is present' });
      return present;
    } catch (err) {
      if (!isNotFound(err)) throw engineError(`inspect image ${image}`, err);
    }
    await this.images.replica(image, onProgress);
    return undefined;
  }

  /**
   * An instance's image as pulled, read with a bound (docker-json.ts), and refused when it
   * is bigger than that: the instance's name is taken off it again.
   */
  private async instanceImage(id: string, ref: string): Promise<Docker.ImageInspectInfo> {
    let answer: { status: number; body: Docker.ImageInspectInfo | undefined };
    try {
      answer = await dockerJson<Docker.ImageInspectInfo>(this.docker, `/images/${id}/json`, MAX_IMAGE_ANSWER_BYTES);
    } catch (err) {
      if (!(err instanceof DockerAnswerTooLarge)) throw engineError(`inspect image ${ref}`, err);
      await this.images.untag(ref);
      throw new RuntimeError('create_failed', `the image's configuration is larger than ${formatBytes(MAX_IMAGE_ANSWER_BYTES)}, more than this node reads`, false);
    }
    if (answer.status === 404 || !answer.body) throw new RuntimeError('pull_failed', `image ${ref} is not on the node after its pull`, true);
    if (answer.status >= 300) throw engineError(`inspect image ${ref}`, new Error(`HTTP ${answer.status}`));
    return answer.body;
  }

  /** `inspected`: the instance's image as instanceImage read it (its config already checked). */
  private async createContainer(spec: TaskSpec, host: HostCapabilities, inspected?: Docker.ImageInspectInfo, retried = false): Promise<Docker.Container> {
    try {
      // An instance's container is made from the image the pull proved, by its ID, never by a name.
      const named = { ...spec, image: spec.kind === 'instance' && inspected ? inspected.Id : dockerName(spec) };
      const image = spec.kind === 'instance' && host.logLimit ? await this.imageCommand(named.image, inspected) : undefined;
      return await this.docker.createContainer(buildContainerSpec(named, host, image));
    } catch (err) {
      if (retried) throw taskFailed('create_failed', `create ${containerName(spec)}`, err);
      // The name is taken: a retried start, or a leftover of an earlier attempt.
      if (dockerStatus(err) === 409) return this.adoptOrReplace(spec, host, inspected, err);
      // The image vanished between our check and the create (someone removed it): once more,
      // and what arrives is read and checked again (the registry may serve another config).
      if (isNotFound(err)) {
        const again = await this.ensureImage(spec);
        if (spec.kind === 'instance') this.checkImageConfig(again!);
        return this.createContainer(spec, host, again, true);
      }
      throw taskFailed('create_failed', `create ${containerName(spec)}`, err);
    }
  }

  /**
   * Why the created container's command cannot run (see command-lookup.ts), or null. An
   * engine that cannot answer is no reason to refuse: the limiter reports a failed exec.
   */
  private async missingCommand(container: Docker.Container): Promise<string | null> {
    const info = await container.inspect().catch(() => null);
    // A running container was adopted from an earlier attempt: its command already ran.
    if (!info || info.State.Running) return null;
    const { Config } = info;
    const argv = commandBehindLimiter(asArgs(Config.Entrypoint), asArgs(Config.Cmd), LOG_INIT_TARGET);
    if (!argv || argv.length === 0) return null;
    const fs = new ContainerFs(this.docker, container.id);
    const stat = (path: string): Promise<StatResult> =>
      fs.stat(path).then(
        ({ mode }) => ({ mode }),
        (err: unknown) => (err instanceof FsError && (err.code === 'ENOENT' || err.code === 'ENOTDIR') ? 'absent' : 'unknown'),
      );
    const lookup = await lookUpProgram(argv[0]!, envValue(Config.Env, 'PATH'), Config.WorkingDir, stat);
    return lookup.found ? null : lookup.reason;
  }

  /** An instance's image whose config would have Docker act for it on the host is refused before a container is made (image-config-check.ts). */
  private checkImageConfig(inspected: Docker.ImageInspectInfo): void {
    const problem = imageConfigProblem(inspected.Config as ImageConfig);
    if (problem) throw new RuntimeError('create_failed', problem, false);
  }

  private async imageCommand(ref: string, inspected?: Docker.ImageInspectInfo): Promise<ImageCommand> {
    const { Config } = inspected ?? (await this.docker.getImage(ref).inspect());
    return { entrypoint: asArgs(Config.Entrypoint), cmd: asArgs(Config.Cmd) };
  }

  private async adoptOrReplace(spec: TaskSpec, host: HostCapabilities, inspected: Docker.ImageInspectInfo | undefined, conflict: unknown): Promise<Docker.Container> {
    const name = containerName(spec);
    const existing = await this.inspectTask(name);
    if (existing.nodeId !== this.nodeId || existing.taskId !== spec.taskId) {
      throw taskFailed('create_failed', `create ${name}: the name belongs to a container this node does not own`, conflict);
    }
    if (existing.state === 'running') return this.docker.getContainer(existing.containerId);
    await this.destroyTask(existing.containerId, { force: true });
    await this.ensureNetwork(spec); // it went with the leftover
    return this.createContainer(spec, host, inspected, true);
  }

  /** Shapes what an instance will be sent, before it starts. */
  private async shapeBridge(spec: TaskSpec, mbps: number): Promise<void> {
    try {
      await shapeToContainer(bridgeName(spec), mbps);
    } catch (err) {
      throw taskFailed('create_failed', `shape ${bridgeName(spec)}`, err);
    }
  }

  /**
   * Sets up a started task's network namespace (what it sends shaped; an instance's DNS
   * queries capped and its subnet refused); one that cannot be set up does not run.
   */
  private async setUpStarted(container: Docker.Container, spec: TaskSpec, steps: Array<(started: Docker.ContainerInspectInfo) => Promise<void>>): Promise<void> {
    // A task that already exited sends nothing (and its handle says it exited).
    const running = async () => await container.inspect().catch(() => null);
    const started = await running();
    if (!started?.State.Running) return;
    try {
      for (const step of steps) await step(started);
    } catch (err) {
      // Exited meanwhile: its namespace went with it. Docker can still say it runs a moment
      // after its process is gone, or is a zombie not yet reaped (seen: a command that exits
      // at once, `nsenter: cannot open /proc/<pid>/ns/net`), so the process itself is asked first.
      if ((await processEnded(started.State.Pid)) || !(await running())?.State.Running) return;
      throw await this.discardUnstarted(container.id, spec, err);
    }
  }

  /** The filter table of a started instance's namespace: its DNS cap, and nothing to its subnet but its gateway. */
  private instanceFilterRules(started: Docker.ContainerInspectInfo): string[] {
    const rules = this.instanceOutbound === 'none' ? embeddedDnsRefusal() : this.dnsQueriesPerSecond > 0 ? dnsLimitRules(this.dnsQueriesPerSecond) : [];
    const network = ownNetworkOf(started);
    return network ? [...rules, ...ownSubnetRules(network)] : rules;
  }

  /** A container that would not start is removed, so the failure leaves nothing behind. */
  private async discardUnstarted(id: string, spec: TaskSpec, startError: unknown): Promise<RuntimeError> {
    const failure = startError instanceof RuntimeError ? startError : taskFailed('start_failed', `start ${containerName(spec)}`, startError);
    try {
      await this.destroyTask(id, { force: true });
    } catch (cleanupError) {
      // Still labelled, so reconcile sweeps it; say so rather than hide it.
      return new RuntimeError(failure.code, `${failure.message} (and its removal failed: ${dockerMessage(cleanupError)})`, failure.recoverable, {
        cause: startError,
      });
    }
    return failure;
  }

  /** Creates the task's network; one left by an earlier attempt of the same task is used as is. */
  private async ensureNetwork(spec: TaskSpec): Promise<void> {
    const options = buildNetworkSpec(spec, this.nodeId, this.instanceOutbound);
    try {
      await this.docker.createNetwork(options);
      return;
    } catch (err) {
      if (dockerStatus(err) !== 409) throw taskFailed('create_failed', `create network ${options.Name}`, err);
    }
    let labels: Record<string, string> | undefined;
    try {
      labels = ((await this.docker.getNetwork(options.Name).inspect()) as { Labels?: Record<string, string> }).Labels;
    } catch (err) {
      throw engineError(`inspect network ${options.Name}`, err);
    }
    if (labels?.[LABEL_NODE] !== this.nodeId || taskFromLabels(labels)?.taskId !== spec.taskId) {
      throw new RuntimeError('create_failed', `create network ${options.Name}: the name belongs to a network this node does not own`, false);
    }
  }

  /** The instance's own capped devpts, on the host, for the container to bind over /dev/pts (task-pts.ts). */
  private async mountPts(spec: TaskSpec, pts: TaskPts): Promise<void> {
    try {
      await mountPts(ptsDir(pts.root, containerName(spec)), pts.max);
    } catch (err) {
      throw taskFailed('create_failed', `mount /dev/pts for ${containerName(spec)}`, err);
    }
  }

  /** Once the container is gone: its devpts directory (and mount, if a failed start left one). */
  private async releasePts(task: Pick<TaskSpec, 'kind' | 'taskId'>): Promise<void> {
    if (task.kind !== 'instance' || !this.pts) return;
    try {
      await unmountPts(ptsDir(this.pts.root, containerName(task)));
    } catch (err) {
      throw engineError(`unmount /dev/pts of ${containerName(task)}`, err);
    }
  }

  /** Not found is success; a network still in use (a container being re-created) stays for reconcile. */
  private async removeNetwork(task: Pick<TaskSpec, 'kind' | 'taskId'>): Promise<void> {
    try {
      await this.docker.getNetwork(networkName(task)).remove();
    } catch (err) {
      if (isNotFound(err) || dockerStatus(err) === 403 || dockerStatus(err) === 409) return;
      throw engineError(`remove network ${networkName(task)}`, err);
    }
  }

  // --- stopping -------------------------------------------------------------

  /** Sends a signal; false when the container is not running or gone (both: nothing to stop). */
  private async signal(container: Docker.Container, signal: string): Promise<boolean> {
    try {
      await container.kill({ signal });
      return true;
    } catch (err) {
      if (isNotFound(err) || isNotRunning(err)) return false;
      throw engineError(`kill -${signal} ${container.id}`, err);
    }
  }

  /** True once the container is not running; false when `ms` passed first. */
  private async exitsWithin(container: Docker.Container, ms: number): Promise<boolean> {
    const timeout = new AbortController();
    const timer = setTimeout(() => timeout.abort(), ms);
    try {
      await container.wait({ condition: 'not-running', abortSignal: timeout.signal });
      return true;
    } catch (err) {
      if (timeout.signal.aborted) return false;
      if (isNotFound(err)) return true;
      throw engineError(`wait for ${container.id}`, err);
    } finally {
      clearTimeout(timer);
    }
  }

  // --- disk -----------------------------------------------------------------

  private async layerSize(container: Docker.Container): Promise<number> {
    try {
      // `size` is a query parameter the engine takes; the typings do not list it.
      const sized = (await container.inspect({ size: true } as Docker.ContainerInspectOptions)) as Docker.ContainerInspectInfo & { SizeRw?: number };
      return sized.SizeRw ?? 0;
    } catch (err) {
      throw engineError(`inspect ${container.id} with its size`, err);
    }
  }

  /** Deleted files the container's processes hold open on its root or volumes. */
  private async deletedOpen(container: Docker.Container, initPid: number, volumes: string[]): Promise<DiskUsage> {
    let top: { Titles: string[]; Processes: string[][] } | null = null;
    try {
      top = (await container.top()) as { Titles: string[]; Processes: string[][] };
    } catch (err) {
      // Stopped between inspect and now: nothing is open any more.
      if (isNotFound(err) || isNotRunning(err)) return { bytes: 0, files: 0 };
      // The engine could not list them (no `ps` on the host): the main process at least.
    }
    const column = top?.Titles.indexOf('PID') ?? -1;
    const pids = column < 0 ? [initPid] : top!.Processes.map((p) => Number(p[column])).filter((pid) => Number.isInteger(pid) && pid > 0);
    return deletedOpenFiles(pids, await devicesOf([`/proc/${initPid}/root`, ...volumes]));
  }

  // --- listing --------------------------------------------------------------

  private async listOwnContainers(): Promise<Docker.ContainerInfo[]> {
    try {
      return await this.docker.listContainers({ all: true, filters: { label: [`${LABEL_NODE}=${this.nodeId}`] } });
    } catch (err) {
      throw engineError('list containers', err);
    }
  }

  private async listOwnNetworks(): Promise<Docker.NetworkInspectInfo[]> {
    try {
      return await this.docker.listNetworks({ filters: { label: [`${LABEL_NODE}=${this.nodeId}`] } });
    } catch (err) {
      throw engineError('list networks', err);
    }
  }

  private handleOf(status: TaskStatus): TaskHandle {
    return {
      taskId: status.taskId,
      kind: status.kind,
      containerId: status.containerId,
      image: status.image,
      state: status.state,
      startedAt: status.startedAt,
      ports: status.ports,
      labels: status.labels,
    };
  }
}

/** The started container's address, prefix and gateway on its one network; null without an address. */
function ownNetworkOf(info: Docker.ContainerInspectInfo): OwnNetwork | null {
  const [network] = Object.values(info.NetworkSettings?.Networks ?? {});
  if (!network?.IPAddress || !network.IPPrefixLen) return null;
  return { address: network.IPAddress, prefixLength: network.IPPrefixLen, gateway: network.Gateway || null };
}

/** Docker's `NetworkSettings.Ports` ({"8000/tcp": [{HostIp, HostPort}]}) -> TCP ports bound on the host. */
export function publishedPorts(ports: Record<string, Array<{ HostIp: string; HostPort: string }> | null> | null | undefined): PublishedPort[] {
  const out: PublishedPort[] = [];
  for (const [key, bindings] of Object.entries(ports ?? {})) {
    const [port, proto] = key.split('/');
    if (proto !== 'tcp' || !bindings) continue;
    for (const b of bindings) {
      const hostPort = Number(b.HostPort);
      if (Number.isInteger(hostPort) && hostPort > 0) out.push({ containerPort: Number(port), hostIp: b.HostIp, hostPort });
    }
  }
  return out;
}

/** The name Docker knows a task's image by: an instance's as pulled through the registry front. */
const dockerName = (spec: TaskSpec): string => (spec.kind === 'instance' ? localImageName(spec.image) : spec.image);

/** A start its caller called off (the task was stopped before it ran). */
const startCancelled = (spec: TaskSpec): RuntimeError => new RuntimeError('start_cancelled', `the start of ${containerName(spec)} was called off: the task was stopped`, false);
