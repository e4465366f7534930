// Who holds the SSH gateway's connections, so that no one can hold too many: connections
// not yet authenticated (node-wide: a handshake costs the agent CPU and memory before it
// knows who is there), connections per source network, and authenticated connections per
// instance. Pure bookkeeping; the gateway closes what this refuses or drops.
//
// The node-wide handshake slots are shared fairly (access/fair-share.ts): anyone can open
// a connection and never log in, holding a slot until the login deadline, so once they
// are full a newcomer takes the oldest slot of the site holding the most, if that site
// holds more than the newcomer's own.
import { clientNetwork, clientSite } from '@svc/shared';
import { FairShare } from '../access/fair-share.js';
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

export class ConnectionBook {
  private readonly handshakes = new FairShare();
  private readonly bySource = new Tally();
  private readonly byInstance = new Tally();

  constructor(private readonly caps: ConnectionCaps) {}

  get pendingHandshakes(): number {
    return this.handshakes.size;
  }

  connectionsOf(instanceId: string): number {
    return this.byInstance.of(instanceId);
  }

  /** Instances with at least one logged-in connection. */
  get instancesConnected(): number {
    return this.byInstance.size;
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
      const victim = this.handshakes.victimFor(site);
      if (!victim) {
        return { ok: false, reason: `${this.handshakes.size} connections are still logging in (SVC_SSH_MAX_PENDING_HANDSHAKES), ${this.handshakes.heldBy(site)} of them from ${site}, no more from any other` };
      }
      victim.drop();
    }
    let instance: string | undefined;
    let closed = false;
    const book = this;
    const close = () => {
      if (closed) return;
      closed = true;
      handshake.release();
      if (instance !== undefined) book.byInstance.remove(instance);
      book.bySource.remove(source);
    };
    const handshake = this.handshakes.add(site, () => {
      close();
      dropped('its handshake slot went to a client holding fewer (SVC_SSH_MAX_PENDING_HANDSHAKES)');
    });
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
          handshake.release();
          instance = instanceId;
          return true;
        },
        close,
      },
    };
  }
}
