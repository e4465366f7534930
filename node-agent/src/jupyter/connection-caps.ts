// Who holds the Jupyter proxy's connections. Anyone who can reach a Jupyter port can open
// a connection without a token, and each one holds a socket and memory in the agent that
// every tenant's SSH, Jupyter and the control-plane stream share. So connections are
// counted per source network (an IPv6 client by its /64), per IPv6 site (its /48, with
// SITE_SHARE times a source's allowance: one party with a /48 would otherwise fill the
// node from a few dozen of its 65,536 /64s) and node-wide across every instance's
// listener; one past a cap is closed at once. Once the node is full, a connection that
// has not yet shown a valid token is shared fairly (access/fair-share.ts): a newcomer
// takes the oldest such connection of the site holding the most, if that site holds more
// than the newcomer's own, so strangers holding idle connections cannot keep tenants out
// of their notebooks. Pure bookkeeping: the proxy closes what this refuses or drops.
import { clientNetwork, clientSite, SITE_SHARE } from '@svc/shared';
import { FairShare } from '../access/fair-share.js';
import { Tally } from '../access/tally.js';

export interface JupyterConnectionLimits {
  /** Open connections node-wide, across every instance's listener. */
  maxConnections: number;
  /** Open connections from one source network. */
  maxConnectionsPerSource: number;
}

export type ConnectionAdmission =
  | {
      ok: true;
      /** The connection closed (safe to call twice). */
      release: () => void;
      /** It showed a valid token: no longer a stranger's slot to give up. */
      authenticated: () => void;
    }
  | { ok: false; reason: string };

export class JupyterConnectionCaps {
  private open = 0;
  private readonly bySource = new Tally();
  private readonly bySite = new Tally();
  private readonly strangers = new FairShare();

  constructor(private readonly limits: JupyterConnectionLimits) {}

  get connections(): number {
    return this.open;
  }

  /**
   * A new connection from `address`: admitted with its release, or refused with why.
   * `dropped` is called (once) if its slot is later given to a newcomer: the caller closes it.
   */
  admit(address: string, dropped: () => void = () => undefined): ConnectionAdmission {
    const network = clientNetwork(address);
    const site = clientSite(address);
    const held = this.bySource.of(network);
    if (held >= this.limits.maxConnectionsPerSource) {
      return { ok: false, reason: `${network} holds ${held} Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` };
    }
    const perSite = this.limits.maxConnectionsPerSource * SITE_SHARE;
    const heldBySite = site === network ? 0 : this.bySite.of(site);
    if (heldBySite >= perSite) {
      return { ok: false, reason: `${site} holds ${heldBySite} Jupyter connections (${SITE_SHARE} x SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` };
    }
    if (this.open >= this.limits.maxConnections) {
      const victim = this.strangers.victimFor(site);
      if (!victim) {
        return { ok: false, reason: `${this.open} connections are open to this node's Jupyter ports (SVC_JUPYTER_MAX_CONNECTIONS)` };
      }
      victim.drop();
    }
    this.open++;
    this.bySource.add(network);
    this.bySite.add(site);
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      stranger.release();
      this.open--;
      this.bySource.remove(network);
      this.bySite.remove(site);
    };
    const stranger = this.strangers.add(site, () => {
      release();
      dropped();
    });
    return { ok: true, release, authenticated: () => stranger.release() };
  }
}
