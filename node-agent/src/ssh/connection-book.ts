// Who holds the SSH gateway's connections, so that no one can hold too many: connections
// not yet authenticated (node-wide: a handshake costs the agent CPU and memory before it
// knows who is there), connections per source network, and authenticated connections per
// instance. Pure bookkeeping; the gateway closes what this refuses or drops.
//
// The node-wide handshake cap is shared fairly. Anyone can open a connection and never log
// in (it holds a slot until the login deadline), so a cap that simply refused the next
// connection once full would let one client, or one party with a /48 of IPv6 networks,
// shut every tenant out of SSH by holding every slot. So when the slots are full, a
// newcomer takes one from the site (@svc/shared's clientSite) holding the most, as long as
// that site holds more than the newcomer's own: its oldest handshake is dropped. A client
// holding many slots cannot keep out one holding few, and cannot take one from itself.
import { clientNetwork, clientSite } from '@svc/shared';
import { Tally } from '../access/tally.js';

export interface ConnectionCaps {
  maxPendingHandshakes: number;
  maxConnectionsPerSource: number;
  maxConnectionsPerInstance: number;
}

export interface ConnectionTicket {
  /** The source network counted (an IPv6 client's /64). */
  readonly source: string;
  /** The instance the connection logged in to, once it did. */
  readonly instanceId: string | undefined;
  /** Counts the connection against the instance; false (nothing changes) when it has its fill. */
  authenticated(instanceId: string): boolean;
  /** The connection closed: forget it (safe to call twice). */
  close(): void;
}

export type Admission = { ok: true; ticket: ConnectionTicket } | { ok: false; reason: string };

/** A connection still logging in, and how to drop it for a fairer claim to its slot. */
interface Handshake {
  site: string;
  drop(): void;
}

export class ConnectionBook {
  /** Oldest first (a Set keeps insertion order). */
  private readonly handshakes = new Set<Handshake>();
  private readonly handshakesBySite = new Tally();
  private readonly bySource = new Tally();
  private readonly byInstance = new Tally();

  constructor(private readonly caps: ConnectionCaps) {}

  get pendingHandshakes(): number {
    return this.handshakes.size;
  }

  connectionsOf(instanceId: string): number {
    return this.byInstance.of(instanceId);
  }

  /**
   * A new TCP connection from `address`. `dropped` is called (once) if the book later
   * gives this connection's handshake slot to another client: the caller closes it.
   */
  open(address: string, dropped: (why: string) => void = () => undefined): Admission {
    const source = clientNetwork(address);
    const site = clientSite(address);
    const fromSource = this.bySource.of(source);
    if (fromSource >= this.caps.maxConnectionsPerSource) return { ok: false, reason: `${source} holds ${fromSource} connections (SVC_SSH_MAX_CONNECTIONS_PER_SOURCE)` };
    if (this.handshakes.size >= this.caps.maxPendingHandshakes) {
      const victim = this.fairVictim(site);
      if (!victim) {
        return { ok: false, reason: `${this.handshakes.size} connections are still logging in (SVC_SSH_MAX_PENDING_HANDSHAKES), ${this.handshakesBySite.of(site)} of them from ${site}, no more from any other` };
      }
      victim.drop();
    }
    let instance: string | undefined;
    let closed = false;
    const book = this;
    const endHandshake = () => {
      book.handshakes.delete(handshake);
      book.handshakesBySite.remove(site);
    };
    const close = () => {
      if (closed) return;
      closed = true;
      if (instance === undefined) endHandshake();
      else book.byInstance.remove(instance);
      book.bySource.remove(source);
    };
    const handshake: Handshake = {
      site,
      drop: () => {
        close();
        dropped(`its handshake slot went to a client holding fewer (SVC_SSH_MAX_PENDING_HANDSHAKES)`);
      },
    };
    this.handshakes.add(handshake);
    this.handshakesBySite.add(site);
    this.bySource.add(source);
    return {
      ok: true,
      ticket: {
        source,
        get instanceId() {
          return instance;
        },
        authenticated(instanceId) {
          if (closed || instance !== undefined) return instance === instanceId;
          if (book.byInstance.of(instanceId) >= book.caps.maxConnectionsPerInstance) return false;
          book.byInstance.add(instanceId);
          endHandshake();
          instance = instanceId;
          return true;
        },
        close,
      },
    };
  }

  /**
   * The handshake to drop for a newcomer from `site`: the oldest of the site holding the
   * most (the oldest handshake breaks a tie), if that site holds more than `site` does.
   */
  private fairVictim(site: string): Handshake | undefined {
    const mine = this.handshakesBySite.of(site);
    let victim: Handshake | undefined;
    let most = mine;
    for (const h of this.handshakes) {
      const held = this.handshakesBySite.of(h.site);
      if (h.site !== site && held > most) {
        victim = h;
        most = held;
      }
    }
    return victim;
  }
}
