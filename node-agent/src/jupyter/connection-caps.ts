// Who holds the Jupyter proxy's connections. Anyone who can reach a Jupyter port can open
// a connection without a token, and each one holds a socket and memory in the agent that
// every tenant's SSH, Jupyter and the control-plane stream share. So connections are
// counted per source network (an IPv6 client by its /64) and node-wide across every
// instance's listener; one past a cap is closed at once. Pure bookkeeping: the proxy
// closes what this refuses.
import { Tally } from '../access/tally.js';

export interface JupyterConnectionLimits {
  /** Open connections node-wide, across every instance's listener. */
  maxConnections: number;
  /** Open connections from one source network. */
  maxConnectionsPerSource: number;
}

export type ConnectionAdmission = { ok: true; release: () => void } | { ok: false; reason: string };

export class JupyterConnectionCaps {
  private open = 0;
  private readonly bySource = new Tally();

  constructor(private readonly limits: JupyterConnectionLimits) {}

  get connections(): number {
    return this.open;
  }

  /** A new connection from `network`: admitted with its release (safe to call twice), or refused with why. */
  admit(network: string): ConnectionAdmission {
    if (this.open >= this.limits.maxConnections) {
      return { ok: false, reason: `${this.open} connections are open to this node's Jupyter ports (SVC_JUPYTER_MAX_CONNECTIONS)` };
    }
    const held = this.bySource.of(network);
    if (held >= this.limits.maxConnectionsPerSource) {
      return { ok: false, reason: `${network} holds ${held} Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` };
    }
    this.open++;
    this.bySource.add(network);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.open--;
        this.bySource.remove(network);
      },
    };
  }
}
