// The per-client connection caps of the shipped HAProxy example (deploy/haproxy/
// control-plane.cfg), run for real with only its bind and server lines replaced: one
// client holds at most 200 connections to the API at once (an IPv6 client by its /64),
// one IPv6 site (its /48) at most 800, so one party with a /48 cannot take the balancer's
// whole maxconn by spreading over its /64s. Addresses from the documentation prefix
// (2001:db8::/32) are put on the loopback device for the test and taken off after it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLoadBalancer, type LoadBalancer } from './support/haproxy.js';
import { freePort } from './support/node-agent-process.js';

const SITE_64S = ['2001:db8:48:1::a', '2001:db8:48:2::a', '2001:db8:48:3::a', '2001:db8:48:4::a', '2001:db8:48:5::a'];
const OTHER_SITE = '2001:db8:49:1::a';
const ADDRESSES = [...SITE_64S, OTHER_SITE];

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: 'pipe' });

let dir: string;
let backend: Server;
let lb: LoadBalancer;
let port: number;

beforeAll(async () => {
  // nodad: usable at once, with no duplicate-address probe to wait out.
  for (const address of ADDRESSES) ip('-6', 'addr', 'replace', `${address}/128`, 'dev', 'lo', 'nodad');
  dir = mkdtempSync(join(tmpdir(), 'haproxy-caps-'));
  // What stands behind the balancer does not matter to its connection caps: a replica's
  // /readyz answer will do.
  backend = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ready"}'));
  backend.keepAliveTimeout = 60_000;
  await new Promise<void>((resolve) => backend.listen(0, '127.0.0.1', resolve));
  port = await freePort();
  lb = await startLoadBalancer(dir, `:::${port} v4v6`, `http://127.0.0.1:${port}`, [(backend.address() as AddressInfo).port]);
}, 60_000);

afterAll(async () => {
  await lb?.stop();
  await new Promise((resolve) => backend?.close(resolve));
  backend?.closeAllConnections();
  if (dir) rmSync(dir, { recursive: true, force: true });
  for (const address of ADDRESSES) {
    try {
      ip('-6', 'addr', 'del', `${address}/128`, 'dev', 'lo');
    } catch {
      // already gone
    }
  }
});

interface Held {
  /** Whether the balancer answered a request on the connection (else it closed it unanswered). */
  answered: Promise<boolean>;
  close(): void;
}

/** Opens a connection from `localAddress` and sends one keep-alive request on it; the connection is then held open. */
function hold(localAddress: string): Held {
  const v6 = localAddress.includes(':');
  const socket = connect({ host: v6 ? SITE_64S[0]! : '127.0.0.1', port, localAddress, family: v6 ? 6 : 4 });
  const answered = new Promise<boolean>((resolve) => {
    let text = '';
    socket.on('connect', () => socket.write(`GET /readyz HTTP/1.1\r\nhost: api\r\n\r\n`));
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString('latin1');
      if (text.includes('\r\n\r\n')) resolve(text.startsWith('HTTP/1.1 200'));
    });
    socket.on('close', () => resolve(false));
    socket.on('error', () => resolve(false));
  });
  return { answered, close: () => socket.destroy() };
}

async function tally(held: Held[]): Promise<{ answered: number; refused: number }> {
  const results = await Promise.all(held.map((h) => h.answered));
  return { answered: results.filter(Boolean).length, refused: results.filter((r) => !r).length };
}

describe('the HAProxy example', () => {
  it('answers /metrics itself with the API\'s 404 (the fleet size is not for strangers), and passes the API through', async () => {
    const metrics = await fetch(`http://127.0.0.1:${port}/metrics`);
    expect(metrics.status).toBe(404);
    expect(await metrics.json()).toEqual({ error: { type: 'not_found', message: 'no route GET /metrics' } });
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).toBe(200);
  });
});

describe('the HAProxy example caps connections per client', () => {
  it('one IPv4 client holds 200 connections; the next is closed unanswered while another client gets in', async () => {
    const held = Array.from({ length: 205 }, () => hold('127.0.0.7'));
    try {
      expect(await tally(held)).toEqual({ answered: 200, refused: 5 });
      const other = hold('127.0.0.8');
      expect(await other.answered).toBe(true);
      other.close();
    } finally {
      for (const h of held) h.close();
    }
  });

  it('an IPv6 client is counted by its /64, and its /48 site at most 800 however many /64s it uses', async () => {
    const held: Held[] = [];
    try {
      // 200 from each of four /64s of one /48: each /64 at its cap, the site at 800.
      const perClient = SITE_64S.slice(0, 4).map((address) => Array.from({ length: 201 }, () => hold(address)));
      held.push(...perClient.flat());
      for (const client of perClient) expect(await tally(client)).toEqual({ answered: 200, refused: 1 });
      // A fifth /64 of the same site gets nothing; another site is served.
      const fifth = Array.from({ length: 3 }, () => hold(SITE_64S[4]!));
      held.push(...fifth);
      expect(await tally(fifth)).toEqual({ answered: 0, refused: 3 });
      const other = hold(OTHER_SITE);
      held.push(other);
      expect(await other.answered).toBe(true);
    } finally {
      for (const h of held) h.close();
    }
  });
});
