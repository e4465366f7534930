// Who holds the Jupyter proxy's connections. Anyone who can reach a Jupyter port can open
// a connection without a token, and each one holds a socket and memory in the agent that
// every tenant's SSH, Jupyter and the control-plane stream share. So connections are
// counted per source network (an IPv6 client by its /64), per IPv6 site (its /48, with
// SITE_SHARE times a source's allowance: one party with a /48 would otherwise fill the
// node from a few dozen of its 65,536 /64s) and node-wide across every instance's
// listener; one past a cap is closed at once. Pure bookkeeping: the proxy closes what
// this refuses.
import { clientNetwork, clientSite, SITE_SHARE } from '@svc/shared';
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
  private readonly bySite = new Tally();

  constructor(private readonly limits: JupyterConnectionLimits) {}

  get connections(): number {
    return this.open;
  }

  /** A new connection from `address`: admitted with its release (safe to call twice), or refused with why. */
  admit(address: string): ConnectionAdmission {
    const network = clientNetwork(address);
    const site = clientSite(address);
    if (this.open >= this.limits.maxConnections) {
      return { ok: false, reason: `${this.open} connections are open to this node's Jupyter ports (SVC_JUPYTER_MAX_CONNECTIONS)` };
    }
    const held = this.bySource.of(network);
    if (held >= this.limits.maxConnectionsPerSource) {
      return { ok: false, reason: `${network} holds ${held} Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` };
    }
    const perSite = this.limits.maxConnectionsPerSource * SITE_SHARE;
    const heldBySite = site === network ? 0 : this.bySite.of(site);
    if (heldBySite >= perSite) {
      return { ok: false, reason: `${site} holds ${heldBySite} Jupyter connections (${SITE_SHARE} x SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` };
    }
    this.open++;
    this.bySource.add(network);
    this.bySite.add(site);
    let released = false;
    return {
      ok: true,
      release: () => {
        if (released) return;
        released = true;
        this.open--;
        this.bySource.remove(network);
        this.bySite.remove(site);
      },
    };
  }
}
