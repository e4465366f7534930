// SSH and Jupyter access to the instances this node runs, as the task code sees it: what
// goes into a new instance's container (its authorized keys as a label, its Jupyter token
// and base URL as environment, so a restarted agent finds both again), registering a
// running instance with the SSH gateway and the Jupyter proxy (starting Jupyter when the
// image has it), and the InstanceAccess its `running` report carries to the control plane.
import { randomBytes } from 'node:crypto';
import type Docker from 'dockerode';
import type { InstanceAccess, HostFacts } from '@svc/proto';
import type { Logger } from '@svc/shared';
import { LABEL_NETWORK_LIMIT, LABEL_SSH_KEYS } from '../runtime/container-spec.js';
import { envValue } from '../runtime/command-lookup.js';
import { JUPYTER_CONTAINER_PORT, jupyterBaseUrl } from '../jupyter/jupyter-command.js';
import type { JupyterLauncher, JupyterOutcome } from '../jupyter/jupyter-launcher.js';
import type { JupyterPortRange } from '../jupyter/jupyter-origin.js';
import type { JupyterProxy } from '../jupyter/jupyter-proxy.js';
import { waitUntilJupyterAnswers } from '../jupyter/jupyter-readiness.js';
import { parseAuthorizedKeys } from '../ssh/authorized-keys.js';
import type { HostKey } from '../ssh/host-key.js';
import type { AccessEntry, AccessRegistry } from './access-registry.js';

export interface AccessEndpoints {
  publicHost: string;
  sshPort: number;
  hostKey: HostKey;
  /** The ports instances' Jupyter origins are made from (one per instance). */
  jupyterPorts: JupyterPortRange;
}

/** What a new instance container gets: environment and labels. */
export interface ContainerAccessSetup {
  env: Record<string, string>;
  sshAuthorizedKeys: string[];
}

/**
 * The InstanceAccess message for an instance (pure). `jupyterOrigin` is the origin of the
 * instance's own Jupyter listener; the URL carries the token, and the control plane shows
 * it only to keys that may write the instance.
 */
export function accessReport(
  endpoints: AccessEndpoints,
  entry: Pick<AccessEntry, 'instanceId' | 'jupyter' | 'jupyterToken' | 'jupyterUnavailableReason'>,
  jupyterOrigin: string | undefined,
): InstanceAccess {
  const live = entry.jupyter !== null && jupyterOrigin !== undefined;
  const jupyterUrl = live ? `${jupyterOrigin}${entry.jupyter!.baseUrl}?token=${entry.jupyterToken}` : '';
  return {
    ssh_host: endpoints.publicHost,
    ssh_port: endpoints.sshPort,
    ssh_user: entry.instanceId,
    ssh_host_key: endpoints.hostKey.publicKey,
    ssh_host_key_fingerprint: endpoints.hostKey.fingerprint,
    jupyter_url: jupyterUrl,
    jupyter_token: live ? entry.jupyterToken : '',
    jupyter_unavailable_reason: live ? '' : (entry.jupyterUnavailableReason ?? 'Jupyter is not set up'),
  };
}

export class InstanceAccessService {
  private readonly reports = new Map<string, InstanceAccess>();

  constructor(
    private readonly deps: {
      docker: Docker;
      registry: AccessRegistry;
      launcher: JupyterLauncher;
      proxy: JupyterProxy;
      endpoints: AccessEndpoints;
      log: Logger;
      /** How long Jupyter has to answer through the proxy before the instance is ready without it. */
      jupyterStartTimeoutMs: number;
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
    const { docker, registry, launcher, proxy, log, jupyterStartTimeoutMs } = this.deps;
    const deadline = Date.now() + jupyterStartTimeoutMs;
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
      networkMbps: Number(info.Config.Labels?.[LABEL_NETWORK_LIMIT]) || null,
    };
    registry.register(entry);
    let origin: string | undefined;
    try {
      // Bounded as a whole: the image's own programs run in it, and the instance's `running`
      // report (so its readiness and its bill) waits for it.
      const ensuring = launcher.ensure({ containerId: info.Id, containerIp: entry.containerIp, token: entry.jupyterToken, baseUrl: jupyterBaseUrl(instanceId), home: entry.home });
      ensuring.catch(() => undefined); // given up on below, it may still fail later
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<JupyterOutcome>((resolve) => {
        timer = setTimeout(
          () => resolve({ ok: false, reason: `setting up Jupyter took longer than ${Math.round(jupyterStartTimeoutMs / 1000)} s` }),
          Math.max(0, deadline - Date.now()),
        );
      });
      const outcome = await Promise.race([ensuring, late]).finally(() => clearTimeout(timer));
      if (outcome.ok) {
        origin = (await proxy.open(instanceId)).origin;
        entry.jupyter = { port: outcome.port, baseUrl: outcome.baseUrl };
        const readiness = await waitUntilJupyterAnswers({
          baseUrl: proxy.localUrl(instanceId)!,
          token: entry.jupyterToken,
          deadline,
          stillWanted: () => registry.current(instanceId) === entry,
        });
        if (!readiness.ok) {
          entry.jupyter = null;
          entry.jupyterUnavailableReason = `Jupyter did not answer through the proxy within ${Math.round(jupyterStartTimeoutMs / 1000)} s (last: ${readiness.lastAnswer})`;
        }
      } else {
        entry.jupyterUnavailableReason = outcome.reason;
      }
    } catch (err) {
      log.warn({ err, instance: instanceId }, 'setting up Jupyter failed');
      entry.jupyterUnavailableReason = `setting up Jupyter failed: ${(err as Error).message}`;
    }
    // Removed meanwhile, or no Jupyter after all: the port goes back.
    if (!entry.jupyter || registry.current(instanceId) !== entry) await proxy.close(instanceId);
    const report = accessReport(this.deps.endpoints, entry, origin);
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
    void this.deps.proxy.close(instanceId).catch((err: unknown) => this.deps.log.warn({ err, instance: instanceId }, 'closing the Jupyter listener failed'));
  }

  /** The node's access endpoints, for HostFacts. */
  hostFacts(): Pick<HostFacts, 'public_host' | 'ssh_port' | 'ssh_host_key_fingerprint' | 'jupyter_port'> {
    const e = this.deps.endpoints;
    // The first port of the range (0: the OS picks each instance's); each instance's read has its own.
    return { public_host: e.publicHost, ssh_port: e.sshPort, ssh_host_key_fingerprint: e.hostKey.fingerprint, jupyter_port: e.jupyterPorts.first };
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
