// A stranger holding the Jupyter ports' connections, over real sockets: no token is
// needed to open one, so one source gets a few, the node a bounded number across every
// instance's port, and one past a cap is closed before anything is read from it, unless
// it takes the slot of a client holding more connections that never showed a token.
// Loopback addresses 127.0.0.2-5 stand for distinct clients.
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessRegistry } from '../access/access-registry.js';
import type { JupyterProxy } from './jupyter-proxy.js';
import { loopbackJupyterEntry, loopbackJupyterProxy } from '../testing/loopback-jupyter-proxy.js';

let upstream: Server;
let proxy: JupyterProxy;
const registry = new AccessRegistry();
const ports: Record<string, number> = {};
const held: Socket[] = [];

const entry = (instanceId: string, port: number) => loopbackJupyterEntry(instanceId, port);

beforeAll(async () => {
  upstream = createServer((_req, res) => res.end('jupyter'));
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const upstreamPort = (upstream.address() as AddressInfo).port;
  for (const id of ['inst_a', 'inst_b']) registry.register(entry(id, upstreamPort));
  proxy = loopbackJupyterProxy({ registry, limits: { maxConnections: 5, maxConnectionsPerSource: 3 } });
  for (const id of ['inst_a', 'inst_b']) ports[id] = (await proxy.open(id)).port;
});

afterAll(async () => {
  for (const socket of held) socket.destroy();
  await proxy.closeAll();
  upstream.closeAllConnections();
  await new Promise((r) => upstream.close(r));
});

/** An idle connection from `localAddress`, once the proxy has accepted or closed it. */
async function idle(instanceId: string, localAddress: string): Promise<Socket> {
  const socket = connect({ host: '127.0.0.1', port: ports[instanceId]!, localAddress });
  held.push(socket);
  socket.on('error', () => {});
  await new Promise((resolve) => socket.once('connect', resolve));
  await new Promise((resolve) => setTimeout(resolve, 50)); // the proxy's accept ran
  return socket;
}

/** A request from `localAddress` with the instance's token: the status line, or null when the connection was closed unanswered. */
function ask(instanceId: string, localAddress: string): Promise<string | null> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port: ports[instanceId]!, localAddress });
    let text = '';
    socket.on('connect', () => socket.write(`GET /${instanceId}/api?token=token-${instanceId} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`));
    socket.on('data', (chunk: Buffer) => (text += chunk.toString('latin1')));
    socket.on('error', () => {});
    socket.on('close', () => resolve(text ? text.slice(0, text.indexOf('\r\n')) : null));
  });
}

describe('Jupyter proxy connection caps', () => {
  it('closes a source\'s connection past its cap at once, serves other sources, counts the node across instances\' ports and shares it fairly when full', async () => {
    const fromTwo = [await idle('inst_a', '127.0.0.2'), await idle('inst_a', '127.0.0.2'), await idle('inst_b', '127.0.0.2')];
    // Three held by 127.0.0.2 across both ports: its fourth is closed unanswered.
    expect(await ask('inst_a', '127.0.0.2')).toBeNull();
    expect(await ask('inst_b', '127.0.0.2')).toBeNull();
    // Another client is served as ever.
    expect(await ask('inst_a', '127.0.0.3')).toBe('HTTP/1.1 200 OK');

    // The node holds at most 5: two more from other sources fill it.
    await idle('inst_b', '127.0.0.3');
    await idle('inst_a', '127.0.0.4');
    // Full, but 127.0.0.2 holds three connections that never showed a token: a newcomer
    // takes the oldest of them and is served.
    const oldestClosed = new Promise((resolve) => fromTwo[0]!.once('close', resolve));
    expect(await ask('inst_b', '127.0.0.5')).toBe('HTTP/1.1 200 OK');
    await oldestClosed;
    expect(fromTwo[1]!.destroyed).toBe(false);

    // Full again with no one holding more than 127.0.0.2's two: it cannot take a slot back.
    await idle('inst_a', '127.0.0.5');
    expect(await ask('inst_a', '127.0.0.2')).toBeNull();
    // A closed connection gives its slot back.
    fromTwo[1]!.destroy();
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await ask('inst_a', '127.0.0.2')).toBe('HTTP/1.1 200 OK');
  });
});
