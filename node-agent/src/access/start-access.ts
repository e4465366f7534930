// Starts what users reach instances through: the node's SSH host key (created once), the
// SSH gateway and the Jupyter proxy on their ports, and the access service the task code
// uses. A port that cannot be bound fails the agent's start, naming the setting.
import type Docker from 'dockerode';
import { ConfigError, type Logger } from '@svc/shared';
import type { AgentConfig } from '../config/agent-config.js';
import { JupyterLauncher } from '../jupyter/jupyter-launcher.js';
import { JupyterProxy } from '../jupyter/jupyter-proxy.js';
import { loadOrCreateHostKey } from '../ssh/host-key.js';
import { SshGateway, type SshLimits } from '../ssh/ssh-gateway.js';
import { AccessRegistry } from './access-registry.js';
import { InstanceAccessService } from './instance-access.js';

export interface RunningAccess {
  service: InstanceAccessService;
  sshPort: number;
  jupyterPort: number;
  close(): Promise<void>;
}

type AccessConfig = Pick<
  AgentConfig,
  | 'dataDir' | 'sshPort' | 'jupyterPort' | 'publicHost' | 'accessBindHost' | 'jupyterPublicUrl'
  | 'sshMaxChannelsPerConnection' | 'sshMaxConnectionsPerInstance' | 'sshMaxConnectionsPerSource' | 'sshMaxPendingHandshakes'
  | 'sshHandshakeTimeoutMs' | 'sshMaxAuthTries' | 'sshMaxEnvVars' | 'sshMaxEnvBytes' | 'sshMaxPtyDimension'
  | 'sftpStageLimitBytes' | 'sftpReorderWindowBytes'
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
    maxEnvVars: config.sshMaxEnvVars,
    maxEnvBytes: config.sshMaxEnvBytes,
    maxPtyDimension: config.sshMaxPtyDimension,
    sftp: { stageLimitBytes: config.sftpStageLimitBytes, reorderWindowBytes: config.sftpReorderWindowBytes },
  };
}

export async function startAccess(config: AccessConfig, deps: { docker: Docker; log: Logger }): Promise<RunningAccess> {
  const { docker, log } = deps;
  const hostKey = await loadOrCreateHostKey(config.dataDir, (message, fields) => log.warn(fields, message));
  if (hostKey.created) log.info({ fingerprint: hostKey.fingerprint }, 'made the SSH host key of this node');
  const registry = new AccessRegistry();
  const gateway = new SshGateway({ registry, docker, hostKey, log, host: config.accessBindHost, port: config.sshPort, limits: sshLimitsOf(config) });
  const proxy = new JupyterProxy({ registry, log, host: config.accessBindHost, port: config.jupyterPort, secureCookies: config.jupyterPublicUrl.startsWith('https:') });
  let sshPort: number;
  let jupyterPort: number;
  try {
    sshPort = await gateway.listen();
  } catch (err) {
    throw new ConfigError(`${(err as Error).message} (SVC_SSH_PORT, SVC_ACCESS_BIND_HOST)`);
  }
  try {
    jupyterPort = await proxy.listen();
  } catch (err) {
    await gateway.close();
    throw new ConfigError(`${(err as Error).message} (SVC_JUPYTER_PORT, SVC_ACCESS_BIND_HOST)`);
  }
  const jupyterOrigin = config.jupyterPublicUrl || `http://${hostForUrl(config.publicHost)}:${jupyterPort}`;
  log.info({ ssh_port: sshPort, jupyter_port: jupyterPort, public_host: config.publicHost, host_key: hostKey.fingerprint }, 'SSH gateway and Jupyter proxy listening');
  const service = new InstanceAccessService({
    docker,
    registry,
    launcher: new JupyterLauncher({ docker, log }),
    endpoints: { publicHost: config.publicHost, sshPort, hostKey, jupyterOrigin, jupyterPort },
    log,
  });
  return {
    service,
    sshPort,
    jupyterPort,
    close: async () => {
      await Promise.all([gateway.close(), proxy.close()]);
    },
  };
}

const hostForUrl = (host: string): string => (host.includes(':') && !host.startsWith('[') ? `[${host}]` : host);
