// Source penalties on the Jupyter ports, over real sockets from different loopback
// addresses (each its own source): a source whose requests keep being refused for want of
// the token is shut out of every Jupyter port of the node for a while, before a byte is
// read, while other sources and requests with the token are served as before.
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { loopbackJupyterEntry, loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';
import type { JupyterProxy } from './jupyter-proxy.js';

let upstream: Server;
const registry = new AccessRegistry();
const proxies: JupyterProxy[] = [];
const ports: Record<string, number> = {};

async function startProxy(env: Record<string, string>, ids: string[]): Promise<Record<string, number>> {
  const proxy = loopbackJupyterProxy({
    registry,
    limits: { maxConnections: 8192, maxConnectionsPerSource: 256 },
    penalties: loadAgentConfig(env).jupyterPenalties,
  });
  proxies.push(proxy);
  const opened: Record<string, number> = {};
  for (const id of ids) opened[id] = (await proxy.open(id)).port;
  return opened;
}

beforeAll(async () => {
  upstream = createServer((_req, res) => res.end('ok'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  for (const id of ['inst_a', 'inst_b', 'inst_c']) registry.register(loopbackJupyterEntry(id, upstreamPort));
  // The default policy ten times over (2 s a refusal, shut out past 150 s): the same count
  // of refusals before the refusal, with the real-time drain made ten times smaller, so a
  // loaded machine that takes seconds over them lets no more in.
  Object.assign(ports, await startProxy({ SVC_JUPYTER_SOURCE_PENALTIES: 'refused:2s min:150s max:1h', SVC_JUPYTER_PENALTY_EXEMPT: '127.0.0.6' }, ['inst_a', 'inst_b']));
});

afterAll(async () => {
  for (const proxy of proxies) await proxy.closeAll();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

/** One request on a new connection from `from`: its status, or 'closed' when the connection closed without an answer. */
function get(from: string, port: number, path: string, token?: string, upgrade = false): Promise<number | 'closed'> {
  return new Promise((resolve) => {
    const headers: Record<string, string> = token ? { authorization: `token ${token}` } : {};
    if (upgrade) Object.assign(headers, { connection: 'Upgrade', upgrade: 'websocket', 'sec-websocket-version': '13', 'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==' });
    const req = request({ host: '127.0.0.1', port, path, localAddress: from, agent: false, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    });
    // A refused upgrade is answered on the raw socket, which node:http reports as a response too.
    req.on('upgrade', (res, socket) => {
      socket.destroy();
      resolve(res.statusCode!);
    });
    req.on('error', () => resolve('closed'));
    req.end();
  });
}

describe('Jupyter source penalties', () => {
  it('a source sending requests without the token is shut out of every Jupyter port after about 75; others are served', async () => {
    const answers: Array<number | 'closed'> = [];
    for (let i = 0; i < 120; i++) answers.push(await get('127.0.0.2', ports.inst_a!, '/inst_a/api/status', undefined, i % 10 === 0));
    const answered = answers.findIndex((a) => a === 'closed');
    // 76 pass the threshold (the drain meanwhile may let a couple more in).
    expect(answered).toBeGreaterThanOrEqual(76);
    expect(answered).toBeLessThanOrEqual(79);
    expect(new Set(answers.slice(0, answered))).toEqual(new Set([401]));
    expect(new Set(answers.slice(answered))).toEqual(new Set(['closed']));
    // Shut out of the other instance's port too, token or not.
    expect(await get('127.0.0.2', ports.inst_b!, '/inst_b/api/status', 'token-inst_b')).toBe('closed');
    // Another source: its requests with the token are forwarded, those without refused.
    expect(await get('127.0.0.3', ports.inst_a!, '/inst_a/api/status', 'token-inst_a')).toBe(200);
    expect(await get('127.0.0.3', ports.inst_a!, '/inst_a/api/status')).toBe(401);
  });

  it('paths no instance serves count too', async () => {
    const answers: Array<number | 'closed'> = [];
    for (let i = 0; i < 100; i++) answers.push(await get('127.0.0.4', ports.inst_a!, '/favicon.ico'));
    expect(answers.slice(0, 76)).toEqual(new Array(76).fill(404));
    expect(answers.at(-1)).toBe('closed');
  });

  it('requests with the token never cost their source, however many', async () => {
    const answers = [];
    for (let i = 0; i < 150; i++) answers.push(await get('127.0.0.5', ports.inst_a!, '/inst_a/api/status', 'token-inst_a'));
    expect(new Set(answers)).toEqual(new Set([200]));
  });

  it('an exempt address is never shut out', async () => {
    const answers = [];
    for (let i = 0; i < 100; i++) answers.push(await get('127.0.0.6', ports.inst_a!, '/inst_a/api/status'));
    expect(new Set(answers)).toEqual(new Set([401]));
  });

  it('the penalty drains in real time: the source is served again once it has', async () => {
    // 2 s a refusal, shut out past 3 s, never more than 4 s: the second passes the
    // threshold however slowly they come (a slow machine may let a third or fourth in).
    const short = await startProxy({ SVC_JUPYTER_SOURCE_PENALTIES: 'refused:2s min:3s max:4s' }, ['inst_c']);
    let refusedAt = -1;
    for (let i = 0; i < 10 && refusedAt < 0; i++) if ((await get('127.0.0.7', short.inst_c!, '/inst_c/api/status')) === 'closed') refusedAt = i;
    expect(refusedAt).toBeGreaterThanOrEqual(2);
    expect(refusedAt).toBeLessThanOrEqual(4);
    // At most max (4 s) later it is served again.
    await new Promise((r) => setTimeout(r, 4_100));
    expect(await get('127.0.0.7', short.inst_c!, '/inst_c/api/status', 'token-inst_c')).toBe(200);
  });
});
