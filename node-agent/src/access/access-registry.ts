// Which instances on this node can be reached, and through what: the container, its
// address on the Docker network, the authorized SSH keys and the Jupyter token. The SSH
// gateway and the Jupyter proxy look instances up here. An instance that is stopping
// (draining) accepts no new connections but keeps the open ones, except its file
// transfers: Docker locks a container while an archive streams, and would not kill it until
// the transfer ended (see holdEngine). A removed instance has every connection it still
// holds closed.
import type { AuthorizedKey } from '../ssh/authorized-keys.js';

export interface JupyterTarget {
  /** Where the Jupyter server listens, inside the container. */
  port: number;
  /** The path prefix the server is configured with: `/<instance id>/`. */
  baseUrl: string;
}

export interface AccessEntry {
  instanceId: string;
  containerId: string;
  /** The container's address on its Docker network; null without one (network mode none). */
  containerIp: string | null;
  keys: AuthorizedKey[];
  /** The container user's home directory (SFTP's starting directory). */
  home: string;
  jupyterToken: string;
  /** Set once a Jupyter server answers (or is expected) in the container. */
  jupyter: JupyterTarget | null;
  /** Why `jupyter` is null; null while it is being set up or when it is there. */
  jupyterUnavailableReason: string | null;
  /** Its bandwidth each way, which its SSH connections share; null: not limited (a container from before limits). */
  networkMbps: number | null;
}

/** Something holding an instance open (an SSH connection, a proxied WebSocket). */
export type Closer = (reason: string) => void;

interface Tracked {
  entry: AccessEntry;
  draining: boolean;
  closers: Set<Closer>;
  /** Engine streams that hold the container's lock (file transfers). */
  engineHolds: Set<() => void>;
}

export type Lookup =
  | { ok: true; entry: AccessEntry }
  | { ok: false; reason: 'unknown' | 'draining' };

export class AccessRegistry {
  private readonly instances = new Map<string, Tracked>();

  /** Registers (or refreshes) an instance; open connections of an earlier registration stay. */
  register(entry: AccessEntry): void {
    const existing = this.instances.get(entry.instanceId);
    if (existing) existing.entry = entry;
    else this.instances.set(entry.instanceId, { entry, draining: false, closers: new Set(), engineHolds: new Set() });
  }

  /** For a new connection: the instance, unless it is unknown or stopping. */
  lookup(instanceId: string): Lookup {
    const tracked = this.instances.get(instanceId);
    if (!tracked) return { ok: false, reason: 'unknown' };
    if (tracked.draining) return { ok: false, reason: 'draining' };
    return { ok: true, entry: tracked.entry };
  }

  /** For traffic on a connection already open: the instance while it is registered, draining or not. */
  current(instanceId: string): AccessEntry | undefined {
    return this.instances.get(instanceId)?.entry;
  }

  /** Stopping: refuse new connections, keep the open ones, end the file transfers. */
  drain(instanceId: string): void {
    const tracked = this.instances.get(instanceId);
    if (!tracked) return;
    tracked.draining = true;
    endAll(tracked.engineHolds);
  }

  /**
   * Tracks an engine stream that locks the instance's container (an archive read or
   * write): a tenant reading a file slowly but steadily would otherwise keep the engine
   * from killing its instance. Returns the function that forgets it, or undefined when the
   * instance is stopping or gone (no new stream then).
   */
  holdEngine(instanceId: string, close: () => void): (() => void) | undefined {
    const tracked = this.instances.get(instanceId);
    if (!tracked || tracked.draining) return undefined;
    tracked.engineHolds.add(close);
    return () => tracked.engineHolds.delete(close);
  }

  /**
   * Tracks a connection of the instance; returns the function that forgets it. A closer
   * added for an unknown instance is called at once.
   */
  track(instanceId: string, closer: Closer): () => void {
    const tracked = this.instances.get(instanceId);
    if (!tracked) {
      closer(`instance ${instanceId} is not running on this node`);
      return () => undefined;
    }
    tracked.closers.add(closer);
    return () => tracked.closers.delete(closer);
  }

  /** The instance is gone: forget it and close what it still holds. */
  remove(instanceId: string, reason: string): void {
    const tracked = this.instances.get(instanceId);
    if (!tracked) return;
    this.instances.delete(instanceId);
    endAll(tracked.engineHolds);
    for (const close of [...tracked.closers]) close(reason);
    tracked.closers.clear();
  }

  /** Open connections of an instance (for tests and logs). */
  connections(instanceId: string): number {
    return this.instances.get(instanceId)?.closers.size ?? 0;
  }

  ids(): string[] {
    return [...this.instances.keys()];
  }
}

function endAll(holds: Set<() => void>): void {
  const ending = [...holds];
  holds.clear();
  for (const end of ending) end();
}
