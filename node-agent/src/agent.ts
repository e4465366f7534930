// Builds and runs the node agent: NVML (real, or the fake for simulated GPUs), the GPU
// monitor and its event watch, the SSH gateway and Jupyter proxy into instances, the gRPC
// client, and the one reconnect loop around enrollment + session. Before anything runs it
// installs the host firewall that keeps task containers away from the host and each other
// (runtime/firewall-rules.ts; SVC_HOST_FIREWALL). stop() is the clean
// shutdown: end the session politely, stop the watch, close the access ports and the
// channel, then nvmlShutdown.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ConfigError, type Clock, type Logger } from '@svc/shared';
import { FAKE_NVIDIA_SMI, openNvml, type Nvml } from 'node-nvml-bindings';
import { nvidiaSmiResetter } from './health/gpu-reset.js';
import Docker from 'dockerode';
import { startAccess, type RunningAccess } from './access/start-access.js';
import type { AgentConfig } from './config/agent-config.js';
import { GpuHealthFile } from './health/health-file.js';
import { buildFirewallRules } from './runtime/firewall-rules.js';
import { installHostFirewall } from './runtime/host-firewall.js';
import { dockerdProxyProblems, startPullProxy, type DockerdProxyInfo, type PullProxy } from './runtime/pull-proxy.js';
import { ReplicaPullWindow, type RegistryPolicy } from './runtime/image-registry.js';
import { buildLogInit, type LogLimit } from './runtime/log-init.js';
import { GIB, MIB } from './runtime/task-limits.js';
import { cgroupVersion } from './host-facts/cgroup-version.js';
import type { IsolationWarning } from './host-facts/isolation-warnings.js';
import { applyKernelSettings, corePatternGoesToTheHost, kernelSettingsFor } from './host-facts/kernel-settings.js';
import { raiseForContainers, SHARED_RLIMITS, unlimitedForContainers } from './host-facts/shared-rlimits.js';
import { DiskPressureWatch, dockerDiskFacts } from './host-facts/disk-pressure.js';
import { dockerRootDir } from './runtime/disk-usage.js';
import { collectHostFacts } from './host-facts/host-facts.js';
import { ensureIdentity } from './identity/enrollment.js';
import { AgentTasks } from './tasks/agent-tasks.js';
import { runReconnectLoop } from './session/reconnect-loop.js';
import { runSession } from './session/session.js';
import { prepareSimulatedNvml } from './simulation/simulated-gpus.js';
import { GpuMonitor } from './telemetry/gpu-monitor.js';
import { HealthEventOutbox } from './telemetry/health-outbox.js';
import { ControlPlaneDialer } from './transport/dialer.js';
import { Backoff, RECONNECT_BACKOFF } from './session/backoff.js';

export const AGENT_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }
).version;

export interface RunningAgent {
  nvml: Nvml;
  /** Settles when the agent stops: resolves after stop(), rejects when the control plane refuses it. */
  done: Promise<void>;
  stop(): Promise<void>;
}

export async function startAgent(config: AgentConfig, deps: { log: Logger; clock: Clock }): Promise<RunningAgent> {
  const { log, clock } = deps;
  // Reported with the host facts, so the control plane shows what the log says here.
  const isolationWarnings: IsolationWarning[] = [];
  // Reads the TLS files: a missing one fails here, before anything is opened.
  const dialer = new ControlPlaneDialer(config);
  if (config.hostFirewall) {
    try {
      await installHostFirewall(buildFirewallRules({ instanceOutbound: config.instanceOutbound, allowCidrs: config.instanceAllowCidrList, blockedPorts: config.instanceBlockedPortList, maxConnectionsPerInstance: config.taskMaxConnections }));
    } catch (err) {
      // Running tenants without it would let them reach the host and each other: refuse to start.
      throw new ConfigError(`cannot install the host firewall (run the agent as root with iptables, or set SVC_HOST_FIREWALL=false where another firewall isolates containers): ${(err as Error).message}`);
    }
    log.info({ instance_outbound: config.instanceOutbound, allow_cidrs: config.instanceAllowCidrList, blocked_ports: config.instanceBlockedPorts }, 'host firewall installed');
  } else {
    isolationWarnings.push('no_host_firewall');
    log.warn('SVC_HOST_FIREWALL=false: task containers can reach this host and each other unless another firewall stops them');
  }
  for (const outcome of await applyKernelSettings(kernelSettingsFor(config))) {
    const { name, changedMessage, failedMessage } = outcome.setting;
    if (outcome.changed) log.info({ sysctl: name, from: outcome.from, to: outcome.to }, changedMessage);
    else if ('error' in outcome) log.warn({ sysctl: name, err: outcome.error }, failedMessage);
  }
  const notRaised = await raiseForContainers();
  if (notRaised.length > 0) log.warn({ failures: notRaised }, 'could not raise containerd\'s limits of queued signals, message queues and locked memory to unlimited');
  const unlimited = await unlimitedForContainers();
  if (SHARED_RLIMITS.some((r) => r.bounded !== undefined && !unlimited.has(r.name))) {
    isolationWarnings.push('shared_rlimits');
    log.warn(
      "containers cannot have root's host-wide counts of queued real-time signals and POSIX message queues unlimited here (containerd's hard limits are bounded): instances are held far below the host's default, but can starve each other's; set LimitSIGPENDING=infinity and LimitMSGQUEUE=infinity for containerd (docs/security.md)",
    );
  }
  if ((await cgroupVersion()) === 1) {
    isolationWarnings.push('cgroup_v1');
    log.warn(
      "this host runs cgroup v1, which charges no container for the writes the kernel flushes in the background: one instance can write past its disk bandwidth through the page cache (docs/security.md); run tenants on cgroup v2",
    );
  }
  if (!config.containerCoreDumps && (await corePatternGoesToTheHost())) {
    isolationWarnings.push('core_dumps_to_host');
    log.warn("SVC_CONTAINER_CORE_DUMPS=false and this host's core_pattern hands dumps to a program: every crash in a container runs it on the host's CPU, outside the container's quota");
  }
  let logLimit: LogLimit | undefined;
  if (config.taskLogBytesPerSecond > 0) {
    try {
      logLimit = { path: await buildLogInit(join(config.dataDir, 'bin')), bytesPerSecond: config.taskLogBytesPerSecond, linesPerSecond: config.taskLogLinesPerSecond };
    } catch (err) {
      throw new ConfigError(`${(err as Error).message}; or set SVC_TASK_LOG_BYTES_PER_SECOND=0 to run instances without it`);
    }
  } else {
    isolationWarnings.push('no_log_limit');
    log.warn("SVC_TASK_LOG_BYTES_PER_SECOND=0: Docker copies whatever an instance prints, on the host's CPU");
  }
  let libraryPath = config.nvmlLibrary || undefined;
  // The GPU reset tool: nvidia-smi from PATH, or the fake one that goes with simulated GPUs.
  let nvidiaSmi = config.nvidiaSmi || 'nvidia-smi';
  if (config.simulation) {
    nvidiaSmi = config.nvidiaSmi || FAKE_NVIDIA_SMI;
    const simulated = await prepareSimulatedNvml(config.simulation, config.dataDir);
    libraryPath = simulated.libraryPath;
    log.info({ gpus: config.simulation.count, state_file: simulated.stateFile }, 'simulating GPUs with the fake NVML; edit the state file to script them');
  }
  const nvml = openNvml({ libraryPath });
  if (nvml.available) {
    log.info({ library: nvml.libraryPath, gpus: nvml.deviceCount(), driver: nvml.driverVersion(), simulated: Boolean(config.simulation) }, 'NVML ready');
  } else {
    log.warn({ reason: nvml.unavailableReason }, 'NVML unavailable: this node reports zero GPUs');
  }

  const docker = new Docker();
  // One policy for the registry check and the pull proxy: a replica's pull opens the node's own registries to the proxy.
  const registryPolicy: RegistryPolicy = { allowed: config.instancePrivateRegistryList, replicaOnly: config.replicaRegistryList, replicaPulls: new ReplicaPullWindow() };
  let pullProxy: PullProxy;
  let access: RunningAccess;
  try {
    pullProxy = await startPullProxy({ port: config.pullProxyPort, policy: registryPolicy, log });
  } catch (err) {
    await nvml.close();
    throw new ConfigError(`${(err as Error).message} (SVC_PULL_PROXY_PORT)`);
  }
  if (!(await warnUnlessPullsUseTheProxy(docker, pullProxy, log))) isolationWarnings.push('pulls_bypass_proxy');
  try {
    access = await startAccess(config, { docker, log });
  } catch (err) {
    await pullProxy.close();
    await nvml.close();
    throw err;
  }

  const outbox = new HealthEventOutbox();
  let monitor: GpuMonitor;
  try {
    monitor = new GpuMonitor({
      nvml,
      clock,
      log,
      policy: {
        ignoredXids: config.ignoredXidSet,
        maxTemperatureC: config.maxGpuTemperatureC,
        temperatureHysteresisC: config.temperatureHysteresisC,
      },
      onHealthEvent: (event) => outbox.push(event),
      healthFile: new GpuHealthFile(config.dataDir),
      resetGpu: nvidiaSmiResetter(nvidiaSmi),
    });
  } catch (err) {
    // A corrupt health file: release what is open, let the caller report it.
    await access.close();
    await pullProxy.close();
    await nvml.close();
    throw err;
  }
  // Asked of the engine once it answers, not on every check: `docker info` gathers far more than the path.
  let rootDir: string | undefined;
  const diskPressure = new DiskPressureWatch(async () => (rootDir ??= await dockerRootDir(docker)), config.diskPressurePercent, config.taskDiskCheckMs, log);
  diskPressure.start();
  const stopping = new AbortController();
  const watching = monitor.watch(stopping.signal);
  // Tasks need the node id for their container labels: built at the first session.
  let tasks: AgentTasks | undefined;

  const done = runReconnectLoop(
    async (signal, hooks) => {
      // A fresh connection per attempt, to the next address after a failure (transport/dialer.ts).
      const client = await dialer.connect(signal);
      try {
        const { identity, enrolled } = await ensureIdentity({
          client,
          dataDir: config.dataDir,
          token: config.nodeToken,
          hostname: config.nodeName,
          pool: config.pool,
          controlPlane: config.controlPlane,
          clock,
          signal,
        });
        if (enrolled) log.info({ node_id: identity.node_id, data_dir: config.dataDir }, 'enrolled; node identity stored');
        tasks ??= new AgentTasks(identity.node_id, log, {
          docker,
          access: access.service,
          limits: {
            reservedCpus: config.reservedCpus,
            reservedMemoryBytes: config.reservedMemoryMib * MIB,
            pidsLimit: config.taskPidsLimit,
            defaultDiskBytes: Math.round(config.taskDiskGib * GIB),
            defaultNetworkMbps: config.taskNetworkMbps,
            diskMBpsPerGpu: config.taskDiskBandwidthMbPerGpu,
            diskIopsPerGpu: config.taskDiskIopsPerGpu,
          },
          diskCheckMs: config.taskDiskCheckMs,
          maxFiles: config.taskMaxFiles,
          admitInstance: () => diskPressure.refusal(),
          diskFull: () => diskPressure.pullRefusal(),
          dnsQueriesPerSecond: config.taskDnsQueriesPerSecond,
          registryPolicy,
          blobSourcesFile: join(config.dataDir, 'blob-sources.json'),
          imageStagingDir: join(config.dataDir, 'image-staging'),
          ...(config.taskMaxPtys > 0 ? { pts: { root: join(config.dataDir, 'pts'), max: config.taskMaxPtys } } : {}),
          maxImageBytes: Math.round(config.maxImageGib * GIB),
          pullDeadline: { stallMs: config.pullStallSeconds * 1000, timeoutMs: Math.round(config.pullTimeoutMinutes * 60_000) },
          imageGc: {
            settings: { highPercent: config.imageGcHighPercent, lowPercent: config.imageGcLowPercent, intervalMs: config.imageGcIntervalMs },
            useLogFile: join(config.dataDir, 'image-use.json'),
          },
          instanceOutbound: config.instanceOutbound,
          ...(logLimit ? { logLimit } : {}),
          replicas: {
            host: config.replicaHost,
            healthIntervalMs: config.replicaHealthIntervalMs,
            startTimeoutMs: config.replicaStartTimeoutMs,
            unhealthyRestartMs: config.replicaUnhealthyRestartMs,
          },
        });
        await runSession(
          {
            client,
            identity,
            hostname: config.nodeName,
            pool: config.pool,
            agentVersion: AGENT_VERSION,
            monitor,
            outbox,
            tasks,
            clock,
            log,
            collectHostFacts: async () => ({
              ...(await collectHostFacts({ nvml, hostname: config.nodeName, agentVersion: AGENT_VERSION, log })),
              ...access.service.hostFacts(),
              ...dockerDiskFacts(await diskPressure.current()),
              isolation_warnings: isolationWarnings,
            }),
            onHostFactsChange: (listener) => diskPressure.onChange(listener),
          },
          signal,
          { onWelcome: hooks.onWelcome },
        );
      } finally {
        client.close();
        // Whatever ended the session, the next attempt tries the next address (if several).
        dialer.moveOn();
      }
    },
    { signal: stopping.signal, log, clock, backoff: new Backoff({ ...RECONNECT_BACKOFF, maxMs: config.reconnectMaxMs }) },
  );

  let stopped: Promise<void> | undefined;
  const stop = (): Promise<void> => {
    stopped ??= (async () => {
      stopping.abort();
      await done.catch(() => undefined); // a refusal is reported through `done` itself
      await watching;
      tasks?.detach();
      diskPressure.stop();
      await access.close();
      await pullProxy.close();
      await nvml.close();
    })();
    return stopped;
  };
  // A refused agent releases what it holds too; the caller still sees the refusal.
  done.catch(() => stop());
  return { nvml, done, stop };
}

/** A start does not wait on a dockerd that does not answer: the sessions report that engine's state. */
const DOCKER_INFO_TIMEOUT_MS = 10_000;

/** Says at every start whether dockerd fetches images through the pull proxy (pull-proxy.ts); true when it does. */
async function warnUnlessPullsUseTheProxy(docker: Docker, proxy: PullProxy, log: Logger): Promise<boolean> {
  let info: DockerdProxyInfo;
  try {
    // dockerode takes the signal although its types do not say so.
    const withSignal = docker.info.bind(docker) as unknown as (opts: { abortSignal: AbortSignal }) => Promise<DockerdProxyInfo>;
    info = await withSignal({ abortSignal: AbortSignal.timeout(DOCKER_INFO_TIMEOUT_MS) });
  } catch (err) {
    log.warn({ err: (err as Error).message }, 'could not ask dockerd whether it fetches images through the pull proxy');
    return false;
  }
  const problems = dockerdProxyProblems(info, proxy.port);
  if (problems.length === 0) log.info({ pull_proxy: proxy.url }, 'dockerd fetches images through the pull proxy');
  for (const problem of problems) log.warn({ pull_proxy: proxy.url }, problem);
  return problems.length === 0;
}

