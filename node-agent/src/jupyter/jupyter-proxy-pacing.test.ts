// Requests through one instance's Jupyter port are paced (each costs the agent's one
// thread): past the rate they wait their turn and all are answered, and another instance's
// requests do not wait behind them. A fast server on loopback stands in for a tenant's own
// server on its Jupyter port.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import { loopbackJupyterEntry, loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';
import type { JupyterProxy } from './jupyter-proxy.js';

const RATE = 100; // a second, 400 at once
let upstream: Server;
let proxy: JupyterProxy;
const ports: Record<string, number> = {};
const registry = new AccessRegistry();

beforeAll(async () => {
  upstream = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  for (const id of ['inst_a', 'inst_b']) registry.register(loopbackJupyterEntry(id, upstreamPort));
  proxy = loopbackJupyterProxy({ registry, limits: { maxConnections: 1000, maxConnectionsPerSource: 1000 }, requestsPerSecond: RATE });
  for (const id of ['inst_a', 'inst_b']) ports[id] = (await proxy.open(id)).port;
});

afterAll(async () => {
  await proxy.closeAll();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

const get = async (id: string): Promise<number> => {
  const res = await fetch(`http://127.0.0.1:${ports[id]}/${id}/api/status`, { headers: { authorization: `token token-${id}` } });
  await res.arrayBuffer();
  return res.status;
};

describe('Jupyter proxy pacing', () => {
  it("paces one instance's requests past its burst, answers every one, and keeps another instance's from waiting behind them", async () => {
    const TOTAL = 600;
    let sent = 0;
    const statuses: number[] = [];
    const finishedAt: Record<string, number> = {};
    const started = performance.now();
    const flood = Promise.all(
      Array.from({ length: 16 }, async () => {
        while (sent < TOTAL) {
          sent++;
          statuses.push(await get('inst_a'));
        }
      }),
    ).then(() => (finishedAt.a = performance.now()));
    // Once A is past its burst, B asks.
    while (statuses.length < 450) await new Promise((r) => setTimeout(r, 10));
    const b = await Promise.all(Array.from({ length: 20 }, () => get('inst_b')));
    finishedAt.b = performance.now();
    await flood;
    expect(statuses).toEqual(Array.from({ length: TOTAL }, () => 200));
    expect(b).toEqual(Array.from({ length: 20 }, () => 200));
    // 400 at once, then 100 a second: at least 2 s for 600 (unpaced, 0.85 s here).
    expect((finishedAt.a! - started) / 1000).toBeGreaterThanOrEqual((TOTAL - 4 * RATE) / RATE - 0.1);
    expect(finishedAt.b).toBeLessThan(finishedAt.a!);
  }, 30_000);
});
