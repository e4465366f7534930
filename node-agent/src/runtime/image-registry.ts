// Which registries a tenant's image may come from. Docker pulls on the host, from the
// host's place in the network: an instance naming `127.0.0.1:9100/x`, `10.0.0.5/x`, or a name
// that resolves to such an address, has dockerd connect into the provider's own network
// (the node's loopback services, its private network, the metadata service at
// 169.254.169.254), and the pull's error, which the tenant reads back as the instance's
// failure_reason, quotes what answered (measured: an HTTP server on the host's loopback had
// its whole 404 page quoted). It would also hand the tenant any image the provider keeps
// in a registry of its own. So an instance's image comes from a registry on public
// addresses only, unless the operator lists it (SVC_INSTANCE_PRIVATE_REGISTRIES), checked
// whether or not the image is already on the node. Replicas, whose images the provider
// chooses, are not checked; registries that hold only those (SVC_REPLICA_REGISTRIES) are
// refused to instances whatever their address. A name is resolved here and again by
// dockerd, so a registry that answers DNS differently the second time gets through (as
// with any check before a connection someone else makes); what its error can quote is cut
// (docker-errors.ts). The pull proxy (pull-proxy.ts) checks again, at each connection
// dockerd makes.
import { isIP } from 'node:net';
import { classifyAddress, type AddressClass } from '@svc/shared/address-class';
import { resolveOperatorName, resolveTenantName } from '@svc/shared/tenant-dns';

/** Docker Hub, where an image without a registry comes from. */
export const DEFAULT_REGISTRY = 'docker.io';

/**
 * The registry an image reference names, as written (`host` or `host:port`, lower case), by
 * Docker's rule: the first path component is a registry when it holds a dot or a colon, is
 * `localhost`, or has capitals (which a repository name may not); otherwise Docker Hub.
 */
export function registryOf(image: string): string {
  const slash = image.indexOf('/');
  if (slash < 0) return DEFAULT_REGISTRY;
  const first = image.slice(0, slash);
  const isRegistry = /[.:]/.test(first) || first === 'localhost' || first !== first.toLowerCase();
  return isRegistry ? first.toLowerCase() : DEFAULT_REGISTRY;
}

/** The registry's host, without its port and an IPv6 address's brackets. */
export function registryHost(registry: string): string {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(registry);
  if (bracketed) return bracketed[1]!;
  return registry.replace(/:\d+$/, '');
}

export interface RegistryPolicy {
  /** Registries (`host` for any port, or `host:port`) instances may pull from although they are not public. */
  allowed: readonly string[];
  /**
   * Registries only the node's own images (replicas) come from (SVC_REPLICA_REGISTRIES):
   * an instance may not name them, and the pull proxy lets dockerd reach them only while a
   * replica's pull from one is under way (`replicaPulls`).
   */
  replicaOnly?: readonly string[];
  replicaPulls?: ReplicaPullWindow;
  /** The addresses a host name resolves to (empty when it resolves to nothing). */
  resolve?: (host: string) => Promise<string[]>;
}

/**
 * Whether a replica's pull from a replica-only registry is under way. dockerd makes every
 * pull's connections alike, so the proxy cannot tell whose pull a connection is for: it
 * opens those registries to dockerd only while such a pull runs.
 */
export class ReplicaPullWindow {
  private pulls = 0;

  /** Marks a pull as under way until the returned function is called (once). */
  begin(): () => void {
    this.pulls += 1;
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.pulls -= 1;
    };
  }

  get open(): boolean {
    return this.pulls > 0;
  }
}

/** Whether `registry` (`host` or `host:port`, lower case) is one of `entries` (each `host` for any port, or `host:port`). */
export function registryListed(entries: readonly string[] | undefined, registry: string): boolean {
  const host = registryHost(registry);
  return (entries ?? []).some((entry) => entry.toLowerCase() === registry || entry.toLowerCase() === host);
}

/** A tenant's name by DNS queries of the agent's own, a listed one as the host resolves it (@svc/shared/tenant-dns). */
const resolveAddresses = async (host: string, listed: boolean): Promise<string[]> => (await (listed ? resolveOperatorName : resolveTenantName)(host)).map((a) => a.address);

/**
 * The addresses `host` stands for: itself when it is one, else what it resolves to (empty
 * when nothing). `listed`: a registry the operator named, trusted to resolve promptly.
 */
export async function addressesOf(host: string, policy: RegistryPolicy, listed = false): Promise<string[]> {
  if (isIP(host)) return [host];
  if (host === 'localhost') return ['127.0.0.1'];
  return (policy.resolve ? policy.resolve(host) : resolveAddresses(host, listed)).catch(() => []);
}

/** The kind of the first address that is not on the public internet, or null when all are. */
export function nonPublicKind(addresses: readonly string[]): AddressClass | null {
  for (const address of addresses) {
    const kind = classifyAddress(address);
    if (kind !== 'public') return kind;
  }
  return null;
}

/**
 * Why an instance may not use `image`, or null when it may (a name that does not resolve is
 * left to Docker's own error). A name is not told what it resolved to: the tenant reads
 * this, and the provider's private names are none of its business.
 */
export async function registryRefusal(image: string, policy: RegistryPolicy): Promise<string | null> {
  const registry = registryOf(image);
  if (registryListed(policy.replicaOnly, registry)) return `image registry ${registry} holds this node's own images: instances pull from other registries`;
  if (registry === DEFAULT_REGISTRY) return null;
  const host = registryHost(registry);
  if (registryListed(policy.allowed, registry)) return null;
  const kind = nonPublicKind(await addressesOf(host, policy));
  if (kind === null) return null;
  const where = isIP(host) ? `is at a ${kind} address` : `resolves to a ${kind} address`;
  return `image registry ${registry} ${where}: instances pull only from registries on public addresses`;
}
