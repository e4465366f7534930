// One model-server replica on this node, from its start order (or re-adoption after an
// agent restart) to its stop: start the container with its port published on
// SVC_REPLICA_HOST, health-check it over HTTP (starting -> running with its endpoint;
// failing checks: unhealthy; recovered: running), and when the container ends, never
// becomes healthy or stays unhealthy, replace it after a backoff (1 s doubling to 60 s),
// reporting every step. One loop per replica; stop() and detach() end it.
import type { Logger } from '@svc/shared';
import { containerName, type TaskSpec } from '../runtime/container-spec.js';
import { isRuntimeError, type TaskHandle, type TaskRuntime } from '../runtime/runtime.js';
import { endpointOf, httpHealthProbe, type HealthProbe, type ProbeResult } from './health-probe.js';
import { RestartBackoff, REPLICA_RESTART_POLICY, type RestartPolicy } from './restart-backoff.js';

export type ReplicaPhase = 'pulling' | 'starting' | 'running' | 'unhealthy' | 'restarting' | 'stopping';

export interface ReplicaSettings {
  /** Address the port is published on and reported in the endpoint (SVC_REPLICA_HOST). */
  host: string;
  healthIntervalMs: number;
  startTimeoutMs: number;
  /** 0: failing checks alone never restart the replica. */
  unhealthyRestartMs: number;
}

export const DEFAULT_REPLICA_SETTINGS: ReplicaSettings = { host: '127.0.0.1', healthIntervalMs: 2000, startTimeoutMs: 1_200_000, unhealthyRestartMs: 60_000 };

/** While a replica loads it is checked this often, so it is routable soon after it is ready. */
export const STARTING_PROBE_MS = 250;
/** A running replica is unhealthy after this many failed checks in a row (one slow answer is not an outage). */
export const FAILURES_TO_UNHEALTHY = 3;
const PROBE_TIMEOUT_MS = 2_000;
/** Grace for a replica that is replaced because it does not answer. */
const REPLACE_GRACE_MS = 10_000;

/** A replica's report, in TaskState's shape (the supervisor adds task id, kind and time). */
export interface ReplicaReport {
  state: ReplicaPhase | 'gone';
  message: string;
  exitCode: number;
  progress: number;
  endpoint: string;
}

export interface ReplicaRunnerDeps {
  runtime: TaskRuntime;
  report: (report: ReplicaReport) => void;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
  settings: ReplicaSettings;
  now?: () => number;
  probe?: HealthProbe;
  policy?: RestartPolicy;
}

type Ending = { kind: 'aborted' } | { kind: 'exited'; exitCode: number; message: string } | { kind: 'unresponsive'; message: string };

export class ReplicaRunner {
  private phase: ReplicaPhase = 'pulling';
  private message = '';
  private endpoint = '';
  private handle: TaskHandle | null = null;
  private healthySince: number | null = null;
  private loop: Promise<void> = Promise.resolve();
  private readonly life = new AbortController();
  private readonly backoff: RestartBackoff;
  private readonly now: () => number;
  private readonly probe: HealthProbe;

  constructor(
    readonly spec: TaskSpec,
    private readonly deps: ReplicaRunnerDeps,
  ) {
    this.backoff = new RestartBackoff(deps.policy ?? REPLICA_RESTART_POLICY);
    this.now = deps.now ?? Date.now;
    this.probe = deps.probe ?? httpHealthProbe;
  }

  get taskId(): string {
    return this.spec.taskId;
  }

  /** The replica as Hello reports it. */
  current(): ReplicaReport {
    return { state: this.phase, message: this.message, exitCode: 0, progress: 0, endpoint: this.endpoint };
  }

  get stopping(): boolean {
    return this.phase === 'stopping';
  }

  /** A fresh start order. */
  start(): void {
    this.loop = this.run(null);
  }

  /**
   * Re-adopts a running container after an agent restart: one health check now, so the
   * Hello that follows says running (or starting), then the same loop as a started one.
   */
  async adopt(handle: TaskHandle): Promise<void> {
    const endpoint = this.endpointFor(handle);
    if (endpoint) {
      this.handle = handle;
      this.endpoint = endpoint;
      const first = await this.check();
      // Failing now: still loading if it started recently, otherwise unhealthy.
      const startedAt = handle.startedAt?.getTime() ?? this.now();
      this.phase = first.ok ? 'running' : this.now() - startedAt < this.deps.settings.startTimeoutMs ? 'starting' : 'unhealthy';
      this.message = first.detail;
      if (first.ok) this.healthySince = this.now();
    }
    this.loop = this.run(endpoint ? handle : null, handle.startedAt?.getTime());
  }

  /** Stops and removes the replica, gracefully unless forced; reports stopping, then gone. */
  async stop(options: { timeoutMs: number; force: boolean }): Promise<void> {
    this.life.abort();
    await this.loop;
    this.set('stopping', {});
    const id = this.handle?.containerId ?? containerName(this.spec);
    let exitCode = 0;
    try {
      await this.deps.runtime.stopTask(id, { timeoutMs: options.timeoutMs, force: options.force });
      exitCode = (await this.deps.runtime.inspectTask(id)).exitCode ?? 0;
      await this.deps.runtime.destroyTask(id, { force: true });
    } catch (err) {
      if (!isRuntimeError(err, 'not_found')) throw err;
    }
    this.handle = null;
    this.deps.report({ state: 'gone', message: '', exitCode, progress: 0, endpoint: '' });
  }

  /** Agent shutdown: stop supervising; the container keeps running for the next agent. */
  detach(): void {
    this.life.abort();
  }

  private get aborted(): boolean {
    return this.life.signal.aborted;
  }

  private async run(adopted: TaskHandle | null, adoptedStartedAt?: number): Promise<void> {
    let handle = adopted;
    let startedAt = adoptedStartedAt ?? this.now();
    while (!this.aborted) {
      try {
        if (!handle) {
          this.healthySince = null;
          handle = await this.startContainer();
          if (!handle) continue; // could not start: reported, backed off; try again
          startedAt = this.now();
          if (this.aborted) break;
          const endpoint = this.endpointFor(handle);
          if (!endpoint) {
            const port = this.spec.publish?.containerPort;
            await this.replace(handle, { kind: 'unresponsive', message: `Docker did not publish container port ${port}` });
            handle = null;
            continue;
          }
          this.endpoint = endpoint;
          this.set('starting', { message: '' });
        }
        const ending = await this.supervise(handle, startedAt);
        if (ending.kind === 'aborted' || this.aborted) break;
        await this.replace(handle, ending);
        handle = null;
      } catch (err) {
        if (this.aborted) break;
        // The engine failed under us (wait, remove): report it and start over after the
        // backoff; a start adopts the container if it still runs.
        this.deps.log.error({ replica: this.taskId, err }, 'replica supervision failed');
        handle = null;
        this.handle = null;
        this.endpoint = '';
        await this.restartAfter(`supervision failed: ${err instanceof Error ? err.message : String(err)}`, 0);
      }
    }
  }

  /** Starts a container; null (after reporting and backing off) when that failed. */
  private async startContainer(): Promise<TaskHandle | null> {
    let reported = -1;
    this.set('pulling', { progress: 0, message: '' });
    try {
      const handle = await this.deps.runtime.startTask(this.spec, (p) => {
        if (p.fraction - reported >= 0.05 || (p.fraction === 1 && reported < 1)) {
          reported = p.fraction;
          this.set('pulling', { progress: p.fraction, message: p.status });
        }
      });
      this.handle = handle;
      return handle;
    } catch (err) {
      if (this.aborted) return null;
      const message = isRuntimeError(err) ? `${err.code.replace('_', ' ')}: ${err.message}` : String(err);
      this.deps.log.warn({ replica: this.taskId, err }, 'replica failed to start');
      await this.restartAfter(`could not start: ${message}`, 0);
      return null;
    }
  }

  /** Waits for the container to end, or for the health checks to give up on it. */
  private async supervise(handle: TaskHandle, startedAt: number): Promise<Ending> {
    const watch = new AbortController();
    const stopWatching = () => watch.abort();
    this.life.signal.addEventListener('abort', stopWatching, { once: true });
    try {
      const exited = this.deps.runtime.waitTask(handle.containerId, watch.signal).then(
        async (exit): Promise<Ending> => ({ kind: 'exited', exitCode: exit.exitCode, message: await this.exitMessage(handle, exit.exitCode, exit.error) }),
        (err: unknown): Ending => {
          if (watch.signal.aborted) return { kind: 'aborted' };
          // Removed under us (docker rm -f): it ended all the same.
          if (isRuntimeError(err, 'not_found')) return { kind: 'exited', exitCode: -1, message: 'the container was removed' };
          throw err;
        },
      );
      return await Promise.race([exited, this.checkHealth(startedAt, watch.signal)]);
    } finally {
      watch.abort();
      this.life.signal.removeEventListener('abort', stopWatching);
    }
  }

  private async exitMessage(handle: TaskHandle, exitCode: number, error: string | null): Promise<string> {
    const status = await this.deps.runtime.inspectTask(handle.containerId).catch(() => null);
    if (status?.oomKilled) return `killed: out of memory (exit code ${exitCode})`;
    return error ? `exited with code ${exitCode}: ${error}` : `exited with code ${exitCode}`;
  }

  /** Health checks until aborted, or until the replica should be replaced. */
  private async checkHealth(startedAt: number, signal: AbortSignal): Promise<Ending> {
    let failures = 0;
    let failingSince: number | null = null;
    while (!signal.aborted) {
      const result = await this.check(signal);
      if (signal.aborted) break;
      const now = this.now();
      if (result.ok) {
        failures = 0;
        failingSince = null;
        if (this.phase !== 'running') {
          this.healthySince ??= now;
          this.set('running', { message: '' });
        }
      } else {
        failures++;
        failingSince ??= now;
        if (this.phase === 'running' && failures >= FAILURES_TO_UNHEALTHY) this.set('unhealthy', { message: result.detail });
        if (this.phase === 'starting' && now - startedAt >= this.deps.settings.startTimeoutMs) {
          return { kind: 'unresponsive', message: `not healthy ${Math.round(this.deps.settings.startTimeoutMs / 1000)} s after it started (${result.detail})` };
        }
        const limit = this.deps.settings.unhealthyRestartMs;
        if (this.phase === 'unhealthy' && limit > 0 && now - failingSince >= limit) {
          return { kind: 'unresponsive', message: `unhealthy for ${Math.round((now - failingSince) / 1000)} s (${result.detail})` };
        }
      }
      await sleep(this.phase === 'starting' ? STARTING_PROBE_MS : this.deps.settings.healthIntervalMs, signal);
    }
    return { kind: 'aborted' };
  }

  private check(signal?: AbortSignal): Promise<ProbeResult> {
    return this.probe(`http://${this.endpoint}${this.spec.healthPath ?? '/health'}`, PROBE_TIMEOUT_MS, signal);
  }

  /** Removes the ended (or unresponsive) container, reports restarting and waits out the backoff. */
  private async replace(handle: TaskHandle, ending: Exclude<Ending, { kind: 'aborted' }>): Promise<void> {
    const runtime = this.deps.runtime;
    if (ending.kind === 'unresponsive') await runtime.stopTask(handle.containerId, { timeoutMs: REPLACE_GRACE_MS });
    await runtime.destroyTask(handle.containerId, { force: true });
    this.handle = null;
    this.endpoint = '';
    const healthyFor = this.healthySince === null ? 0 : this.now() - this.healthySince;
    this.deps.log.warn({ replica: this.taskId, why: ending.message }, 'replica ended; restarting it');
    await this.restartAfter(ending.message, healthyFor, ending.kind === 'exited' ? ending.exitCode : 0);
  }

  private async restartAfter(why: string, healthyForMs: number, exitCode = 0): Promise<void> {
    const delay = this.backoff.next(healthyForMs);
    this.healthySince = null;
    this.set('restarting', { message: `${why}; restarting in ${delay / 1000} s`, exitCode });
    await sleep(delay, this.life.signal);
  }

  private endpointFor(handle: TaskHandle): string | null {
    const port = handle.ports.find((p) => p.containerPort === this.spec.publish?.containerPort);
    return port ? endpointOf(this.deps.settings.host, port.hostPort) : null;
  }

  private set(phase: ReplicaPhase, detail: { message?: string; progress?: number; exitCode?: number }): void {
    this.phase = phase;
    if (detail.message !== undefined) this.message = detail.message;
    this.deps.report({ state: phase, message: this.message, exitCode: detail.exitCode ?? 0, progress: detail.progress ?? 0, endpoint: this.endpoint });
  }
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}
