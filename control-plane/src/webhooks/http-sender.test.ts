import type { LookupAddress } from 'node:dns';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { BlockedTargetError, guardedLookup, httpSender } from './http-sender.js';
import { buildTargetPolicy, type Resolver } from './target-policy.js';

/** A resolver answering from a table. */
function fakeDns(table: Record<string, string[]>): Resolver {
  return async (host) => (table[host] ?? []).map((address): LookupAddress => ({ address, family: address.includes(':') ? 6 : 4 }));
}

function lookupOnce(fn: ReturnType<typeof guardedLookup>, host: string): Promise<string> {
  return new Promise((resolve, reject) => fn(host, {}, (err, address) => (err ? reject(err) : resolve(String(address)))));
}

describe('the connection-time address check (DNS rebinding)', () => {
  it('refuses a host that now resolves to a private address in production', async () => {
    const lookup = guardedLookup(buildTargetPolicy('production', []), fakeDns({ 'hooks.example.com': ['10.0.0.7'] }));
    await expect(lookupOnce(lookup, 'hooks.example.com')).rejects.toThrow(BlockedTargetError);
    await expect(lookupOnce(lookup, 'hooks.example.com')).rejects.toThrow(/an address that is a private address/);
  });

  it('lets public addresses and operator-allowed ones through', async () => {
    const dns = fakeDns({ 'hooks.example.com': ['93.184.216.34'], 'inside.example.com': ['10.0.0.7'] });
    expect(await lookupOnce(guardedLookup(buildTargetPolicy('production', []), dns), 'hooks.example.com')).toBe('93.184.216.34');
    expect(await lookupOnce(guardedLookup(buildTargetPolicy('production', ['10.0.0.0/24']), dns), 'inside.example.com')).toBe('10.0.0.7');
  });
});

describe('httpSender', () => {
  it('refuses an address literal the policy forbids without connecting', async () => {
    let hits = 0;
    const server = createServer((_req, res) => {
      hits += 1;
      res.end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    const send = httpSender(buildTargetPolicy('production', []));
    const outcome = await send({ url: `http://127.0.0.1:${port}/`, headers: {}, body: '{}', timeoutMs: 1000, signal: new AbortController().signal });
    server.close();
    expect(outcome.statusCode).toBeNull();
    expect(outcome.error).toMatch(/^blocked: 127\.0\.0\.1 is a loopback address/);
    expect(hits).toBe(0);
  });

  it('reports the status, Retry-After, refused connections and timeouts', async () => {
    let flooded = 0;
    const server = createServer((req, res) => {
      if (req.url === '/slow') return; // never answers
      if (req.url === '/trickle') return void res.writeHead(200).write('never ends');
      if (req.url === '/flood') {
        // As fast as the receiver takes it, without end, until the sender goes away.
        const chunk = Buffer.alloc(64 * 1024, 0x20);
        res.writeHead(200);
        const more = (): void => {
          while (!res.destroyed && res.write(chunk)) flooded += chunk.length;
          if (!res.destroyed) res.once('drain', more);
        };
        res.on('close', () => res.destroy());
        return more();
      }
      res.writeHead(503, { 'retry-after': '7' }).end('busy');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    const send = httpSender(buildTargetPolicy('development', ['127.0.0.1']));
    const signal = new AbortController().signal;
    expect(await send({ url: `${base}/`, headers: {}, body: '{}', timeoutMs: 1000, signal })).toMatchObject({ statusCode: 503, retryAfter: '7' });
    const slow = await send({ url: `${base}/slow`, headers: {}, body: '{}', timeoutMs: 150, signal });
    expect(slow).toMatchObject({ statusCode: null, error: expect.stringMatching(/ETIMEDOUT/) });
    // A body that never ends is cut at the deadline too, so the attempt always settles.
    const trickle = await send({ url: `${base}/trickle`, headers: {}, body: '{}', timeoutMs: 150, signal });
    expect(trickle.error).not.toBeNull();
    expect(trickle.durationMs).toBeLessThan(1000);
    // One that floods is read no further than 64 KiB: its status settles the attempt long before the deadline.
    const flood = await send({ url: `${base}/flood`, headers: {}, body: '{}', timeoutMs: 10_000, signal });
    expect(flood).toMatchObject({ statusCode: 200, error: null });
    expect(flood.durationMs).toBeLessThan(5_000);
    expect(flooded).toBeLessThan(64 * 1024 * 1024);
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
    const refused = await send({ url: `${base}/`, headers: {}, body: '{}', timeoutMs: 1000, signal });
    expect(refused).toMatchObject({ statusCode: null, error: expect.stringMatching(/ECONNREFUSED/) });
  });
});

describe('httpSender at send time', () => {
  async function receiver(answer: (url: string) => [number, Record<string, string>]) {
    const hits: string[] = [];
    const server = createServer((req, res) => {
      hits.push(req.url ?? '');
      const [status, headers] = answer(req.url ?? '');
      res.writeHead(status, headers).end();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const port = (server.address() as AddressInfo).port;
    return { hits, port, close: () => new Promise((r) => server.close(r)) };
  }
  const signal = new AbortController().signal;

  it('connects to the address the injected resolver gave, and refuses it by default when it is loopback', async () => {
    const r = await receiver(() => [204, {}]);
    const dns = fakeDns({ 'hooks.example.com': ['127.0.0.1'] });
    const url = `http://hooks.example.com:${r.port}/in`;
    // The default policy (no allowed targets), in development as in production.
    const blocked = await httpSender(buildTargetPolicy('development', []), Date.now, dns)({ url, headers: {}, body: '{}', timeoutMs: 1000, signal });
    expect(blocked).toMatchObject({ statusCode: null, error: expect.stringMatching(/^blocked: hooks\.example\.com resolves to an address that is a loopback address/) });
    expect(r.hits).toEqual([]);
    // An operator exception lets the same request through, over the same lookup.
    const allowed = await httpSender(buildTargetPolicy('development', ['127.0.0.1']), Date.now, dns)({ url, headers: {}, body: '{}', timeoutMs: 1000, signal });
    expect(allowed).toMatchObject({ statusCode: 204, error: null });
    expect(r.hits).toEqual(['/in']);
    await r.close();
  });

  it('does not follow a redirect: a 3xx is the outcome and nothing else is requested', async () => {
    const r = await receiver((url) => (url === '/in' ? [302, { location: 'http://169.254.169.254/latest/meta-data' }] : [200, {}]));
    const send = httpSender(buildTargetPolicy('development', ['127.0.0.1']));
    const outcome = await send({ url: `http://127.0.0.1:${r.port}/in`, headers: {}, body: '{}', timeoutMs: 1000, signal });
    expect(outcome.statusCode).toBe(302);
    expect(r.hits).toEqual(['/in']);
    await r.close();
  });
});
