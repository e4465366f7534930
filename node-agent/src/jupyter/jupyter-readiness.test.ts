// The readiness wait against a real HTTP server on loopback, with an injected clock so the
// bound is tested without waiting for it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitUntilJupyterAnswers } from './jupyter-readiness.js';

let server: Server;
let base = '';
/** How many requests answer 502 before Jupyter "comes up"; Infinity: never. */
let failuresLeft = 0;
const seenTokens: string[] = [];
/** A service on the host's own network that an instance must not reach through the agent. */
let internalServer: Server;
let internal = '';
const internalHits: string[] = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    seenTokens.push(String(req.headers.authorization));
    if (req.url === '/inst_redirects/api') return void res.writeHead(302, { location: `${internal}/internal/secret-op?x=1` }).end();
    if (req.url === '/inst_endless/api') {
      // A body that never ends, as fast as the agent reads it.
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(1024 * 1024, 120);
      const pump = () => {
        while (!res.destroyed && res.write(chunk));
        if (!res.destroyed) res.once('drain', pump);
      };
      return void pump();
    }
    if (req.url !== '/inst_x/api') return void res.writeHead(404).end();
    if (failuresLeft > 0) {
      failuresLeft -= 1;
      return void res.writeHead(502).end();
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"version":"6.4.12"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/inst_x/`;
  internalServer = createServer((req, res) => {
    internalHits.push(String(req.url));
    res.writeHead(204).end();
  });
  await new Promise<void>((resolve) => internalServer.listen(0, '127.0.0.1', resolve));
  internal = `http://127.0.0.1:${(internalServer.address() as AddressInfo).port}`;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
  await new Promise((r) => internalServer.close(r));
});

/** A clock that moves one second per reading. */
const ticking = (start = 0) => {
  let t = start;
  return () => (t += 1_000);
};

describe('waiting for Jupyter to answer through the proxy', () => {
  it('waits through 502s until the API answers, with the token', async () => {
    failuresLeft = 3;
    seenTokens.length = 0;
    expect(await waitUntilJupyterAnswers({ baseUrl: base, token: 't0k', deadline: 60_000, stillWanted: () => true, now: ticking(), intervalMs: 1 })).toEqual({ ok: true });
    expect(seenTokens).toEqual(['token t0k', 'token t0k', 'token t0k', 'token t0k']);
  });

  it('gives up at the bound and says what it last got', async () => {
    failuresLeft = Infinity;
    const result = await waitUntilJupyterAnswers({ baseUrl: base, token: 't0k', deadline: 5_000, stillWanted: () => true, now: ticking(), intervalMs: 1 });
    expect(result).toEqual({ ok: false, lastAnswer: 'HTTP 502' });
  });

  it("follows no redirect of the tenant's server: the host's internal service is never asked, and the tenant reads only the first status", async () => {
    const result = await waitUntilJupyterAnswers({ baseUrl: base.replace('inst_x', 'inst_redirects'), token: 't', deadline: 3_000, stillWanted: () => true, now: ticking(), intervalMs: 1 });
    expect(result).toEqual({ ok: false, lastAnswer: 'HTTP 302' });
    expect(internalHits).toEqual([]);
  });

  it('reads no body it does not need: an endless 200 answer counts as an answer, at once', async () => {
    const before = process.memoryUsage().rss;
    expect(await waitUntilJupyterAnswers({ baseUrl: base.replace('inst_x', 'inst_endless'), token: 't', deadline: 3_000, stillWanted: () => true, now: ticking(), intervalMs: 1 })).toEqual({ ok: true });
    expect(process.memoryUsage().rss - before).toBeLessThan(64 * 1024 * 1024);
  });

  it('gives up when nothing listens, and stops when the instance is gone', async () => {
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const port = (closed.address() as AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const refused = await waitUntilJupyterAnswers({ baseUrl: `http://127.0.0.1:${port}/inst_x/`, token: 't', deadline: 3_000, stillWanted: () => true, now: ticking(), intervalMs: 1 });
    expect(refused.ok).toBe(false);
    failuresLeft = Infinity;
    expect(await waitUntilJupyterAnswers({ baseUrl: base, token: 't', deadline: Number.MAX_SAFE_INTEGER, stillWanted: () => false, intervalMs: 1 })).toEqual({ ok: false, lastAnswer: 'the instance is gone' });
  });
});
