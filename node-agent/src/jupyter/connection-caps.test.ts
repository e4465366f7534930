import { describe, expect, it } from 'vitest';
import { JupyterConnectionCaps } from './connection-caps.js';

describe('JupyterConnectionCaps', () => {
  it('admits up to the per-source cap, counts sources apart, and frees a slot on release', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 100, maxConnectionsPerSource: 2 });
    const a1 = caps.admit('198.51.100.1');
    const a2 = caps.admit('198.51.100.1');
    expect(a1.ok && a2.ok).toBe(true);
    expect(caps.admit('198.51.100.1')).toEqual({ ok: false, reason: '198.51.100.1 holds 2 Jupyter connections (SVC_JUPYTER_MAX_CONNECTIONS_PER_SOURCE)' });
    expect(caps.admit('2001:db8:1:2::/64').ok).toBe(true);
    if (a1.ok) {
      a1.release();
      a1.release(); // twice: no extra slot
    }
    expect(caps.connections).toBe(2);
    expect(caps.admit('198.51.100.1').ok).toBe(true);
    expect(caps.admit('198.51.100.1').ok).toBe(false);
  });

  it('refuses past the node-wide cap whatever the source, until one closes', () => {
    const caps = new JupyterConnectionCaps({ maxConnections: 3, maxConnectionsPerSource: 10 });
    const held = ['198.51.100.1', '198.51.100.2', '198.51.100.3'].map((s) => caps.admit(s));
    expect(held.every((h) => h.ok)).toBe(true);
    expect(caps.admit('198.51.100.4')).toEqual({ ok: false, reason: "3 connections are open to this node's Jupyter ports (SVC_JUPYTER_MAX_CONNECTIONS)" });
    if (held[0]!.ok) held[0]!.release();
    expect(caps.admit('198.51.100.4').ok).toBe(true);
  });
});
