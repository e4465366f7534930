// What a tenant can make the agent relay through Jupyter, over real sockets: every byte
// costs the agent's CPU, so the instances with connections that showed their token share
// the node's Jupyter budget equally, downloads, uploads and WebSockets alike, and an
// instance never gets more than its own bandwidth. A stranger (no token) takes no share
// and cannot stream bytes in. Unshaped, 10 MiB crosses loopback in a few ms.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import type { JupyterProxy } from './jupyter-proxy.js';
import { loopbackJupyterEntry, loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';

const MIB = 1024 * 1024;
const PAYLOAD = 10 * MIB;
/** 10 MiB at the whole budget takes 1.05 s; at half of it, 2.1 s. */
const NODE_MBPS = 80;

let upstream: Server;
let proxy: JupyterProxy;
const registry = new AccessRegistry();
const ports: Record<string, number> = {};

const entry = (instanceId: string, port: number, networkMbps: number | null) => loopbackJupyterEntry(instanceId, port, { networkMbps });
const url = (id: string, path: string) => `http://127.0.0.1:${ports[id]}/${id}/${path}?token=token-${id}`;

beforeAll(async () => {
  const big = Buffer.alloc(PAYLOAD, 7);
  upstream = createServer((req, res) => {
    if (req.method === 'GET') return res.end(big);
    let received = 0;
    req.on('data', (chunk: Buffer) => (received += chunk.length));
    req.on('end', () => res.end(String(received)));
  });
  new WebSocketServer({ server: upstream }).on('connection', (ws) => ws.send(big));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  // A and B may each use more than the budget; C's own bandwidth is 8 Mbit/s.
  registry.register(entry('inst_a', upstreamPort, 1000));
  registry.register(entry('inst_b', upstreamPort, null));
  registry.register(entry('inst_c', upstreamPort, 8));
  proxy = loopbackJupyterProxy({ registry, limits: { maxConnections: 1000, maxConnectionsPerSource: 1000 }, nodeMbps: NODE_MBPS });
  for (const id of ['inst_a', 'inst_b', 'inst_c']) ports[id] = (await proxy.open(id)).port;
});

afterAll(async () => {
  await proxy.closeAll();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

async function timed<T>(work: () => Promise<T>): Promise<[T, number]> {
  const started = performance.now();
  const result = await work();
  return [result, performance.now() - started];
}

const download = (id: string) => timed(async () => (await (await fetch(url(id, 'files/big'))).arrayBuffer()).byteLength);

/** A kept-alive connection to the instance's port after one request, with the token or without. */
async function holdOpen(id: string, withToken: boolean): Promise<{ socket: Socket; answer: string }> {
  const socket = connect({ host: '127.0.0.1', port: ports[id]! });
  await new Promise((resolve) => socket.once('connect', resolve));
  socket.write(`GET /${id}/api${withToken ? `?token=token-${id}` : ''} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  const answer = await new Promise<string>((resolve) => socket.once('data', (chunk: Buffer) => resolve(chunk.toString('latin1'))));
  return { socket, answer: answer.slice(0, answer.indexOf('\r\n')) };
}

describe('Jupyter proxy bandwidth', () => {
  it("holds an instance alone to the node's budget, and halves it while another instance's tenant is connected", async () => {
    const [alone, aloneMs] = await download('inst_a');
    expect(alone).toBe(PAYLOAD);
    expect(aloneMs).toBeGreaterThan(800);

    const other = await holdOpen('inst_b', true);
    expect(other.answer).toBe('HTTP/1.1 200 OK');
    try {
      const [shared, sharedMs] = await download('inst_a');
      expect(shared).toBe(PAYLOAD);
      expect(sharedMs).toBeGreaterThan(1_700);
    } finally {
      other.socket.destroy();
    }
  }, 30_000);

  it("gives a stranger's connection no share, and closes it after refusing its request, body unread", async () => {
    // Held open without a token, it is answered 401 and closed: A keeps the whole budget.
    const stranger = await holdOpen('inst_b', false);
    expect(stranger.answer).toBe('HTTP/1.1 401 Unauthorized');
    await new Promise((resolve) => (stranger.socket.destroyed ? resolve(null) : stranger.socket.once('close', resolve)));
    const [, aloneMs] = await download('inst_a');
    expect(aloneMs).toBeLessThan(1_700);

    // A body that never ends: refused, and the connection is closed rather than read on.
    const endless = connect({ host: '127.0.0.1', port: ports.inst_b! });
    endless.on('error', () => undefined);
    await new Promise((resolve) => endless.once('connect', resolve));
    endless.write('POST /inst_b/api/contents/x HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n');
    const chunk = Buffer.alloc(64 * 1024, 1);
    const frame = Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n')]);
    let answer = '';
    endless.on('data', (b: Buffer) => (answer += b.toString('latin1')));
    const closed = new Promise((resolve) => endless.once('close', resolve));
    const pump = setInterval(() => endless.writable && endless.write(frame), 1);
    try {
      await closed;
    } finally {
      clearInterval(pump);
      endless.destroy();
    }
    expect(answer.slice(0, answer.indexOf('\r\n'))).toBe('HTTP/1.1 401 Unauthorized');
  }, 30_000);

  it('holds uploads and WebSocket messages to it too', async () => {
    const [sent, sentMs] = await timed(async () => (await fetch(url('inst_a', 'api/contents/up'), { method: 'PUT', body: Buffer.alloc(PAYLOAD) })).text());
    expect(sent).toBe(String(PAYLOAD));
    expect(sentMs).toBeGreaterThan(800);

    const [message, wsMs] = await timed(
      () =>
        new Promise<Buffer>((resolve, reject) => {
          const ws = new WebSocket(url('inst_b', 'api/kernels/k/channels').replace('http:', 'ws:'));
          ws.once('message', (data: Buffer) => {
            ws.close();
            resolve(data);
          });
          ws.once('error', reject);
        }),
    );
    expect(message.length).toBe(PAYLOAD);
    expect(wsMs).toBeGreaterThan(800);
  }, 30_000);

  it('never gives an instance more than its own bandwidth', async () => {
    // 2 MiB at C's 8 Mbit/s is 2.1 s (1.8 s after the first burst), though the node's budget would allow ten times that.
    const [bytes, ms] = await timed(async () => (await fetch(url('inst_c', 'api/contents/up'), { method: 'PUT', body: Buffer.alloc(2 * MIB) })).text());
    expect(bytes).toBe(String(2 * MIB));
    expect(ms).toBeGreaterThan(1_400);
  }, 30_000);
});
