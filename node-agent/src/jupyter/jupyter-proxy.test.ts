// The Jupyter proxy against a real HTTP/WebSocket upstream on loopback standing in for a
// container's Jupyter: what goes up (the token, no browser cookies), what comes back (no
// upstream cookies), one port per instance, and refusals of cookie use from elsewhere.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import { cookieName, cookieValue } from './jupyter-auth.js';
import type { JupyterProxy } from './jupyter-proxy.js';
import { loopbackJupyterEntry, loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';

let upstream: Server;
let seen: IncomingMessage[] = [];
let proxy: JupyterProxy;
const registry = new AccessRegistry();
const ports: Record<string, number> = {};

const entry = (instanceId: string, token: string, port: number) => loopbackJupyterEntry(instanceId, port, { jupyterToken: token });
const url = (id: string, path = '') => `http://127.0.0.1:${ports[id]}/${id}/${path}`;

beforeAll(async () => {
  upstream = createServer((req, res) => {
    seen.push(req);
    res.setHeader('set-cookie', ['_xsrf=2|abc; Path=/', 'username-127-0-0-1=secret; HttpOnly; Path=/']);
    // What a tenant's server would send to let a service worker take the whole origin.
    res.setHeader('service-worker-allowed', '/');
    res.end('jupyter');
  });
  const wss = new WebSocketServer({ server: upstream });
  wss.on('headers', (headers) => headers.push('Set-Cookie: _xsrf=2|ws; Path=/'));
  wss.on('connection', (ws) => ws.send('hello'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  registry.register(entry('inst_a', 'token-a', upstreamPort));
  registry.register(entry('inst_b', 'token-b', upstreamPort));
  proxy = loopbackJupyterProxy({ registry, limits: { maxConnections: 1000, maxConnectionsPerSource: 1000 } });
  for (const id of ['inst_a', 'inst_b']) ports[id] = (await proxy.open(id)).port;
});

afterAll(async () => {
  await proxy.closeAll();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

describe('Jupyter proxy', () => {
  it('gives each instance its own port and origin, and serves only that instance there', async () => {
    expect(ports.inst_a).not.toBe(ports.inst_b);
    expect(proxy.listener('inst_a')?.origin).toBe(`http://127.0.0.1:${ports.inst_a}`);
    expect(await proxy.open('inst_a')).toEqual(proxy.listener('inst_a')); // opening again answers the same port
    const wrong = await fetch(`http://127.0.0.1:${ports.inst_a}/inst_b/api?token=token-b`);
    expect(wrong.status).toBe(404);
    expect(((await wrong.json()) as { error: { type: string } }).error.type).toBe('not_found');
  });

  it('sends the token up instead of the browser\'s cookies, and keeps Jupyter\'s cookies from the browser', async () => {
    seen = [];
    const res = await fetch(url('inst_a', 'tree?token=token-a'), { headers: { cookie: 'other_site=1; svc_jupyter_inst_b=x' } });
    expect(await res.text()).toBe('jupyter');
    expect(res.headers.getSetCookie()).toEqual([`${cookieName('inst_a')}=${cookieValue('token-a')}; Path=/inst_a/; HttpOnly; SameSite=Strict`]);
    expect(seen[0]!.headers.cookie).toBeUndefined();
    expect(seen[0]!.headers.authorization).toBe('token token-a');
    // Later requests with the cookie alone: no Set-Cookie from upstream either.
    const next = await fetch(url('inst_a', 'api/contents'), { headers: { cookie: `${cookieName('inst_a')}=${cookieValue('token-a')}` } });
    expect(next.status).toBe(200);
    expect(next.headers.getSetCookie()).toEqual([]);
    await next.arrayBuffer();
  });

  it("registers no service worker: the origin serves the next instance's Jupyter once this one is gone, and a worker would answer its pages, token and all", async () => {
    seen = [];
    const script = await fetch(url('inst_a', 'sw.js?token=token-a'), { headers: { 'service-worker': 'script' } });
    expect(script.status).toBe(403);
    expect(((await script.json()) as { error: { type: string } }).error.type).toBe('forbidden');
    expect(seen).toEqual([]);
    const page = await fetch(url('inst_a', 'tree?token=token-a'));
    expect(page.status).toBe(200);
    expect(page.headers.get('service-worker-allowed')).toBeNull();
    await page.arrayBuffer();
  });

  it('refuses the cookie from another instance\'s origin, over HTTP and WebSocket', async () => {
    const cookie = `${cookieName('inst_b')}=${cookieValue('token-b')}`;
    const fromA = `http://127.0.0.1:${ports.inst_a}`;
    const res = await fetch(url('inst_b', 'api/contents'), { method: 'POST', headers: { cookie, origin: fromA } });
    expect(res.status).toBe(403);
    await res.arrayBuffer();
    const refused = await new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(url('inst_b', 'api/kernels/k/channels').replace('http', 'ws'), { headers: { cookie, origin: fromA } });
      ws.on('unexpected-response', (_req, r) => resolve(r.statusCode ?? 0));
      ws.on('open', () => reject(new Error('opened')));
    });
    expect(refused).toBe(403);
    // From B's own origin the same WebSocket opens and talks to Jupyter; the upgrade's cookie stays behind.
    const { greeting, upgradeCookies } = await new Promise<{ greeting: string; upgradeCookies: unknown }>((resolve, reject) => {
      let upgradeCookies: unknown;
      const ws = new WebSocket(url('inst_b', 'api/kernels/k/channels').replace('http', 'ws'), { headers: { cookie, origin: `http://127.0.0.1:${ports.inst_b}` } });
      ws.on('upgrade', (answer) => (upgradeCookies = answer.headers['set-cookie']));
      ws.on('message', (data) => {
        ws.close();
        resolve({ greeting: String(data), upgradeCookies });
      });
      ws.on('error', reject);
    });
    expect(greeting).toBe('hello');
    expect(upgradeCookies).toBeUndefined();
  });

  it('gives the port back when the instance is gone', async () => {
    registry.remove('inst_b', 'gone');
    await proxy.close('inst_b');
    expect(proxy.listener('inst_b')).toBeUndefined();
    await expect(fetch(url('inst_b', 'api?token=token-b'))).rejects.toThrow();
  });
});
