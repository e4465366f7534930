// Who holds the SSH gateway's connections, so that no one can hold too many: connections
// not yet authenticated (node-wide: a handshake costs the agent CPU and memory before it
// knows who is there), connections per source address, and authenticated connections per
// instance. Pure bookkeeping; the gateway closes what this refuses.
import { Tally } from '../access/tally.js';

export interface ConnectionCaps {
  maxPendingHandshakes: number;
  maxConnectionsPerSource: number;
  maxConnectionsPerInstance: number;
}

export interface ConnectionTicket {
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
  private pending = 0;
  private readonly bySource = new Tally();
  private readonly byInstance = new Tally();

  constructor(private readonly caps: ConnectionCaps) {}

  get pendingHandshakes(): number {
    return this.pending;
  }

  connectionsOf(instanceId: string): number {
    return this.byInstance.of(instanceId);
  }

  /** A new TCP connection from `source`. */
  open(source: string): Admission {
    if (this.pending >= this.caps.maxPendingHandshakes) return { ok: false, reason: `${this.pending} connections are still logging in (SVC_SSH_MAX_PENDING_HANDSHAKES)` };
    const fromSource = this.bySource.of(source);
    if (fromSource >= this.caps.maxConnectionsPerSource) return { ok: false, reason: `${source} holds ${fromSource} connections (SVC_SSH_MAX_CONNECTIONS_PER_SOURCE)` };
    this.pending++;
    this.bySource.add(source);
    let instance: string | undefined;
    let closed = false;
    const book = this;
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
          book.pending--;
          instance = instanceId;
          return true;
        },
        close() {
          if (closed) return;
          closed = true;
          if (instance === undefined) book.pending--;
          else book.byInstance.remove(instance);
          book.bySource.remove(source);
        },
      },
    };
  }
}
