import { describe, expect, it } from 'vitest';
import { SITE_SHARE } from '@svc/shared';
import { JupyterConnectionCaps } from './connection-caps.js';

describe('JupyterConnectionCaps', () => {
  it('admits up to the per-source cap, counts sources apart, and frees a slot on release', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 100, maxConnectionsPerSource: 2 });
    const a1 = caps.admit('198.51.100.1');
    const a2 = caps.admit('198.51.100.1');
    expect(a1.ok && a2.ok).toBe(true);
    expect(caps.admit('198.51.100.1')).toEqual({ ok: false, reason: '198.51.100.1 holds 2 Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)' });
    expect(caps.admit('2001:db8:1:2::1').ok).toBe(true);
    if (a1.ok) {
      a1.release();
      a1.release(); // twice: no extra slot
    }
    expect(caps.connections).toBe(2);
    expect(caps.admit('198.51.100.1').ok).toBe(true);
    expect(caps.admit('198.51.100.1').ok).toBe(false);
  });

  it('refuses past the node-wide cap when every connection showed a token, until one closes', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 3, maxConnectionsPerSource: 10 });
    const held = ['198.51.100.1', '198.51.100.2', '198.51.100.3'].map((s) => caps.admit(s));
    for (const h of held) if (h.ok) h.authenticated();
    expect(caps.admit('198.51.100.4')).toEqual({ ok: false, reason: "3 connections are open to this node's Jupyter ports (SVC_JUPYTER_MAX_CONNECTIONS)" });
    if (held[0]!.ok) held[0]!.release();
    expect(caps.admit('198.51.100.4').ok).toBe(true);
  });

  it('once full, a newcomer takes the oldest tokenless connection of the client holding the most, never one of its own', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 4, maxConnectionsPerSource: 10 });
    const drops: string[] = [];
    const admit = (address: string, name: string) => {
      const a = caps.admit(address, () => drops.push(name));
      if (!a.ok) throw new Error(a.reason);
      return a;
    };
    const tenant = admit('198.51.100.1', 'tenant');
    tenant.authenticated(); // showed its token: never given up
    admit('203.0.113.66', 'idle1');
    admit('203.0.113.66', 'idle2');
    admit('203.0.113.66', 'idle3');
    expect(caps.admit('203.0.113.66', () => drops.push('idle4'))).toMatchObject({ ok: false }); // not from itself
    admit('198.51.100.2', 'newcomer');
    expect(drops).toEqual(['idle1']);
    expect(caps.connections).toBe(4);
  });

  it('counts an IPv6 source by its /64, and its /48 site up to SITE_SHARE sources\' worth', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 1000, maxConnectionsPerSource: 2 });
    expect(caps.admit('2001:db8:1:2::1').ok).toBe(true);
    expect(caps.admit('2001:db8:1:2:ffff::9').ok).toBe(true);
    expect(caps.admit('2001:db8:1:2::3')).toEqual({ ok: false, reason: '2001:db8:1:2::/64 holds 2 Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)' });
    // Fresh /64s of the same /48 add up to the site's allowance, not one each without end.
    for (let i = 3; i < 1 + 2 * SITE_SHARE; i++) expect(caps.admit(`2001:db8:1:${i}::1`).ok).toBe(true);
    expect(caps.admit('2001:db8:1:ff::1')).toEqual({ ok: false, reason: `2001:db8:1::/48 holds ${2 * SITE_SHARE} Jupyter connections (${SITE_SHARE} x SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)` });
    expect(caps.admit('2001:db8:2:1::1').ok).toBe(true); // another site
  });
});
