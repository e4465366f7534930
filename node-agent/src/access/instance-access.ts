// SSH and Jupyter access to the instances this node runs, as the task code sees it: what
// goes into a new instance's container (its authorized keys as a label, its Jupyter token
// and base URL as environment, so a restarted agent finds both again), registering a
// running instance with the SSH gateway and the Jupyter proxy (starting Jupyter when the
// image has it), and the InstanceAccess its `running` report carries to the control plane.
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { InstanceAccess, HostFacts } from '@svc/proto';
import type { Logger } from '@svc/shared';
import { LABEL_SSH_KEYS } from '../runtime/container-spec.js';
import { envValue, JUPYTER_CONTAINER_PORT, jupyterBaseUrl } from '../jupyter/jupyter-command.js';
import type { JupyterLauncher } from '../jupyter/jupyter-launcher.js';
import { parseAuthorizedKeys } from '../ssh/authorized-keys.js';
import type { HostKey } from '../ssh/host-key.js';
import type { AccessEntry, AccessRegistry } from './access-registry.js';


export interface AccessEndpoints {
  publicHost: string;
  sshPort: number;
  hostKey: HostKey;
  /** Origin of Jupyter URLs: http://<public host>:<proxy port>, or the configured public URL. */
  jupyterOrigin: string;
  jupyterPort: number;
}

/** What a new instance container gets: environment and labels. */
export interface ContainerAccessSetup {
  env: Record<string, string>;
  sshAuthorizedKeys: string[];
}

/** The InstanceAccess message for an instance (pure). */
export function accessReport(endpoints: AccessEndpoints, entry: Pick<AccessEntry, 'instanceId' | 'jupyter' | 'jupyterToken' | 'jupyterUnavailableReason'>): InstanceAccess {
  const jupyterUrl = entry.jupyter ? `${endpoints.jupyterOrigin}${entry.jupyter.baseUrl}?token=${entry.jupyterToken}` : '';
  return {
    ssh_host: endpoints.publicHost,
    ssh_port: endpoints.sshPort,
    ssh_user: entry.instanceId,
    ssh_host_key: endpoints.hostKey.publicKey,
    ssh_host_key_fingerprint: endpoints.hostKey.fingerprint,
    jupyter_url: jupyterUrl,
    jupyter_token: entry.jupyter ? entry.jupyterToken : '',
    jupyter_unavailable_reason: entry.jupyter ? '' : (entry.jupyterUnavailableReason ?? 'Jupyter is not set up'),
  };
}

export class InstanceAccessService {
  private readonly reports = new Map<string, InstanceAccess>();

  constructor(
    private readonly deps: {
      docker: Docker;
      registry: AccessRegistry;
      launcher: JupyterLauncher;
      endpoints: AccessEndpoints;
      log: Logger;
    },
  ) {}

  get registry(): AccessRegistry {
    return this.deps.registry;
  }

  /** Environment and labels for a new instance container. */
  containerSetup(instanceId: string, sshAuthorizedKeys: readonly string[]): ContainerAccessSetup {
    return {
      env: {
        // Jupyter reads JUPYTER_TOKEN by itself; an image that runs its own Jupyter uses the base URL and port too.
        JUPYTER_TOKEN: randomBytes(24).toString('hex'),
        SVC_JUPYTER_BASE_URL: jupyterBaseUrl(instanceId),
        SVC_JUPYTER_PORT: String(JUPYTER_CONTAINER_PORT),
      },
      sshAuthorizedKeys: [...sshAuthorizedKeys],
    };
  }

  /**
   * Makes a running instance reachable: reads its keys, token and address from the
   * container, registers it, gets Jupyter going; returns what the `running` report carries.
   */
  async attach(instanceId: string, containerId: string): Promise<InstanceAccess> {
    const { docker, registry, launcher, log } = this.deps;
    const info = await docker.getContainer(containerId).inspect();
    const env = info.Config.Env ?? [];
    const { keys, unusable } = parseAuthorizedKeys((info.Config.Labels?.[LABEL_SSH_KEYS] ?? '').split('\n'));
    if (unusable.length > 0) log.warn({ instance: instanceId, unusable }, 'some SSH keys of the instance cannot be used with the gateway');
    const entry: AccessEntry = {
      instanceId,
      containerId: info.Id,
      containerIp: containerIpOf(info),
      keys,
      home: homeOf(info.Config.User, envValue(env, 'HOME')),
      // A container made before this agent version has no token: Jupyter the agent starts gets a fresh one.
      jupyterToken: envValue(env, 'JUPYTER_TOKEN') || randomBytes(24).toString('hex'),
      jupyter: null,
      jupyterUnavailableReason: null,
    };
    registry.register(entry);
    try {
      const outcome = await launcher.ensure({ containerId: info.Id, containerIp: entry.containerIp, token: entry.jupyterToken, baseUrl: jupyterBaseUrl(instanceId), home: entry.home });
      if (outcome.ok) entry.jupyter = { port: outcome.port, baseUrl: outcome.baseUrl };
      else entry.jupyterUnavailableReason = outcome.reason;
    } catch (err) {
      log.warn({ err, instance: instanceId }, 'setting up Jupyter failed');
      entry.jupyterUnavailableReason = `setting up Jupyter failed: ${(err as Error).message}`;
    }
    const report = accessReport(this.deps.endpoints, entry);
    this.reports.set(instanceId, report);
    return report;
  }

  /** The last access report of a running instance (for Hello.running_tasks). */
  describe(instanceId: string): InstanceAccess | undefined {
    return this.reports.get(instanceId);
  }

  /** Stopping: no new SSH logins or Jupyter requests; open ones carry on. */
  drain(instanceId: string): void {
    this.deps.registry.drain(instanceId);
  }

  /** Gone: every connection still open is closed with `reason`. */
  remove(instanceId: string, reason: string): void {
    this.reports.delete(instanceId);
    this.deps.registry.remove(instanceId, reason);
  }

  /** The node's access endpoints, for HostFacts. */
  hostFacts(): Pick<HostFacts, 'public_host' | 'ssh_port' | 'ssh_host_key_fingerprint' | 'jupyter_port'> {
    const e = this.deps.endpoints;
    return { public_host: e.publicHost, ssh_port: e.sshPort, ssh_host_key_fingerprint: e.hostKey.fingerprint, jupyter_port: e.jupyterPort };
  }
}

function containerIpOf(info: Docker.ContainerInspectInfo): string | null {
  if (info.NetworkSettings.IPAddress) return info.NetworkSettings.IPAddress;
  for (const network of Object.values(info.NetworkSettings.Networks ?? {})) if (network.IPAddress) return network.IPAddress;
  return null;
}

/** Where SFTP starts and the agent's Jupyter opens: $HOME, else root's home, else /. */
export function homeOf(user: string | undefined, home: string | undefined): string {
  if (home?.startsWith('/')) return home;
  return !user || user === 'root' || user === '0' || user.startsWith('0:') || user.startsWith('root:') ? '/root' : '/';
}
