// Starts what users reach instances through: the node's SSH host key (created once), the
// SSH gateway on its port, the Jupyter proxy (which opens a port per instance as instances
// come), and the access service the task code uses. An SSH port that cannot be bound
// fails the agent's start, naming the setting.
import { join } from 'node:path';
import type Docker from 'dockerode';
import { ConfigError, type Logger } from '@svc/shared';
import type { AgentConfig } from '../config/agent-config.js';
import { JupyterLauncher } from '../jupyter/jupyter-launcher.js';
import { JupyterProxy } from '../jupyter/jupyter-proxy.js';
import { KernelDropList } from './kernel-drop.js';
import { JupyterPortMemory } from '../jupyter/port-memory.js';
import { loadOrCreateHostKey } from '../ssh/host-key.js';
import { SshGateway, type SshLimits } from '../ssh/ssh-gateway.js';

/**
 * About what all of one instance's SFTP directory listings held open may take of the
 * agent's memory (instance-budget.ts): ten of the largest listings a session reads.
 */
export const LISTING_BUDGET_BYTES = 256 * 1024 * 1024;
import { AccessRegistry } from './access-registry.js';
import { InstanceAccessService } from './instance-access.js';

export interface RunningAccess {
  service: InstanceAccessService;
  sshPort: number;
  close(): Promise<void>;
}

type AccessConfig = Pick<
  AgentConfig,
  | 'dataDir' | 'sshPort' | 'jupyterPort' | 'jupyterPortCount' | 'publicHost' | 'accessBindHost' | 'jupyterPublicUrl' | 'jupyterStartTimeoutMs'
  | 'sshMaxChannelsPerConnection' | 'sshMaxConnectionsPerInstance' | 'sshMaxConnectionsPerSource' | 'sshMaxPendingHandshakes'
  | 'sshHandshakeTimeoutMs' | 'sshMaxAuthTries' | 'sshPenalties' | 'sshMaxEnvVars' | 'sshMaxEnvBytes' | 'sshMaxPtyDimension' | 'sshNodeMbps' | 'sshEngineCallsPerSecond'
  | 'sftpStageLimitBytes' | 'sftpStageBudgetBytes' | 'sftpReorderWindowBytes' | 'jupyterMaxConnections' | 'jupyterMaxConnectionsPerSource' | 'jupyterNodeMbps' | 'jupyterRequestsPerSecond' | 'jupyterPenalties' | 'hostFirewall'
>;

/** The SSH gateway's bounds, from the settings. */
export function sshLimitsOf(config: AccessConfig): SshLimits {
  return {
    maxChannelsPerConnection: config.sshMaxChannelsPerConnection,
    maxConnectionsPerInstance: config.sshMaxConnectionsPerInstance,
    maxConnectionsPerSource: config.sshMaxConnectionsPerSource,
    maxPendingHandshakes: config.sshMaxPendingHandshakes,
    handshakeTimeoutMs: config.sshHandshakeTimeoutMs,
    maxAuthTries: config.sshMaxAuthTries,
    penalties: config.sshPenalties,
    nodeMbps: config.sshNodeMbps,
    engineCallsPerSecond: config.sshEngineCallsPerSecond,
    maxEnvVars: config.sshMaxEnvVars,
    maxEnvBytes: config.sshMaxEnvBytes,
    maxPtyDimension: config.sshMaxPtyDimension,
    sftp: { stageLimitBytes: config.sftpStageLimitBytes, stageBudgetBytes: config.sftpStageBudgetBytes, listingBudgetBytes: LISTING_BUDGET_BYTES, reorderWindowBytes: config.sftpReorderWindowBytes },
  };
}

export async function startAccess(config: AccessConfig, deps: { docker: Docker; log: Logger }): Promise<RunningAccess> {
  const { docker, log } = deps;
  const hostKey = await loadOrCreateHostKey(config.dataDir, (message, fields) => log.warn(fields, message));
  if (hostKey.created) log.info({ fingerprint: hostKey.fingerprint }, 'made the SSH host key of this node');
  const registry = new AccessRegistry();
  // Penalized sources are dropped by the kernel where the agent's firewall has the rule for it.
  let dropFailed = false;
  const kernelDrop = config.hostFirewall
    ? new KernelDropList({
        onError: (err) => {
          if (dropFailed) return;
          dropFailed = true;
          log.warn({ err: err.message }, 'cannot hand penalized sources to the kernel (xt_recent); the agent refuses their connections itself');
        },
      })
    : undefined;
  const gateway = new SshGateway({ registry, docker, hostKey, log, host: config.accessBindHost, port: config.sshPort, limits: sshLimitsOf(config), kernelDrop });
  const jupyterPorts = { first: config.jupyterPort, count: config.jupyterPortCount };
  const proxy = new JupyterProxy({
    registry,
    log,
    host: config.accessBindHost,
    ports: jupyterPorts,
    publicUrl: config.jupyterPublicUrl,
    publicHost: config.publicHost,
    limits: { maxConnections: config.jupyterMaxConnections, maxConnectionsPerSource: config.jupyterMaxConnectionsPerSource },
    nodeMbps: config.jupyterNodeMbps,
    requestsPerSecond: config.jupyterRequestsPerSecond,
    penalties: config.jupyterPenalties,
    kernelDrop,
    memory: new JupyterPortMemory(join(config.dataDir, 'jupyter-ports.json')),
  });
  let sshPort: number;
  try {
    sshPort = await gateway.listen();
  } catch (err) {
    throw new ConfigError(`${(err as Error).message} (SVC_SSH_PORT, SVC_ACCESS_BIND_HOST)`);
  }
  log.info({ ssh_port: sshPort, jupyter_ports: jupyterPorts, public_host: config.publicHost, host_key: hostKey.fingerprint }, 'SSH gateway listening; Jupyter gets a port per instance');
  const service = new InstanceAccessService({
    docker,
    registry,
    launcher: new JupyterLauncher({ docker, log, startTimeoutMs: config.jupyterStartTimeoutMs }),
    proxy,
    endpoints: { publicHost: config.publicHost, sshPort, hostKey, jupyterPorts },
    log,
    jupyterStartTimeoutMs: config.jupyterStartTimeoutMs,
  });
  return {
    service,
    sshPort,
    close: async () => {
      await Promise.all([gateway.close(), proxy.closeAll(), kernelDrop?.close()]);
    },
  };
}
