import { once } from 'node:events';
import { createServer as createHttpServer, request, type Server as HttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { checkDestination, dockerdProxyProblems, parseAuthority, startPullProxy, type PullProxy } from './pull-proxy.js';
import { ReplicaPullWindow } from './image-registry.js';

const log = createLogger('silent', 'pull-proxy-test');

describe('parseAuthority', () => {
  it.each([
    ['registry.example.com:443', { host: 'registry.example.com', port: 443 }],
    ['10.0.0.5:5000', { host: '10.0.0.5', port: 5000 }],
    ['[fd00::1]:443', { host: 'fd00::1', port: 443 }],
  ])('reads %s', (authority, parsed) => {
    expect(parseAuthority(authority)).toEqual(parsed);
  });

  it.each(['registry.example.com', 'a:0', 'a:70000', 'user@a:443', '/path:443', 'fd00::1:443', ''])('refuses %s', (authority) => {
    expect(parseAuthority(authority)).toBeNull();
  });
});

describe('checkDestination', () => {
  const names: Record<string, string[]> = {
    'registry-1.docker.io': ['44.205.64.79'],
    'mixed.example.com': ['44.205.64.80', '10.1.2.3'],
    'mirror.internal': ['10.9.9.9'],
  };
  const policy = (allowed: string[] = []) => ({ allowed, resolve: async (host: string) => names[host] ?? [] });

  it.each([
    ['registry-1.docker.io', 443, { addresses: ['44.205.64.79'], port: 443 }],
    ['mixed.example.com', 443, { refused: 'mixed.example.com is not on a public address (private)', status: 403 }],
    ['169.254.169.254', 80, { refused: '169.254.169.254 is not on a public address (link-local)', status: 403 }],
    ['127.0.0.1', 5000, { refused: '127.0.0.1 is not on a public address (loopback)', status: 403 }],
    ['::ffff:10.0.0.1', 443, { refused: '::ffff:10.0.0.1 is not on a public address (private)', status: 403 }],
    ['nowhere.example.com', 443, { refused: 'nowhere.example.com does not resolve', status: 502 }],
  ])('%s:%d', async (host, port, destination) => {
    expect(await checkDestination(host, port, policy())).toEqual(destination);
  });

  it("lets the operator's listed registries through at their own addresses, by host or by host and port", async () => {
    expect(await checkDestination('mirror.internal', 5000, policy(['mirror.internal']))).toEqual({ addresses: ['10.9.9.9'], port: 5000 });
    expect(await checkDestination('mirror.internal', 5000, policy(['mirror.internal:5000']))).toEqual({ addresses: ['10.9.9.9'], port: 5000 });
    expect(await checkDestination('mirror.internal', 5001, policy(['mirror.internal:5000']))).toMatchObject({ status: 403 });
    expect(await checkDestination('fd00::1', 443, policy(['[fd00::1]:443']))).toEqual({ addresses: ['fd00::1'], port: 443 });
  });

  it("lets a registry of the node's own images through only while a replica pulls from one", async () => {
    const replicaPulls = new ReplicaPullWindow();
    const own = { ...policy(), replicaOnly: ['models.internal'], replicaPulls };
    names['models.internal'] = ['10.9.9.10'];
    expect(await checkDestination('models.internal', 5000, own)).toEqual({ refused: 'models.internal is not on a public address (private)', status: 403 });
    const first = replicaPulls.begin();
    const second = replicaPulls.begin();
    expect(await checkDestination('models.internal', 5000, own)).toEqual({ addresses: ['10.9.9.10'], port: 5000 });
    // Other private destinations stay shut while the window is open.
    expect(await checkDestination('mirror.internal', 5000, own)).toMatchObject({ status: 403 });
    first();
    first(); // ending twice ends once
    expect(await checkDestination('models.internal', 5000, own)).toEqual({ addresses: ['10.9.9.10'], port: 5000 });
    second();
    expect(await checkDestination('models.internal', 5000, own)).toMatchObject({ status: 403 });
  });
});

describe("dockerdProxyProblems: whether dockerd's pulls all pass through the proxy", () => {
  const ours = 'http://127.0.0.1:3129';
  it.each([
    [{ HttpProxy: ours, HttpsProxy: ours }, []],
    [{ HttpProxy: 'http://localhost:3129/', HttpsProxy: 'http://localhost:3129' }, []],
    [{}, ["HTTP_PROXY and HTTPS_PROXY are not the agent's pull proxy"]],
    [{ HttpProxy: ours }, ["HTTPS_PROXY is not the agent's pull proxy"]],
    [{ HttpProxy: ours, HttpsProxy: 'http://127.0.0.1:3128' }, ["HTTPS_PROXY is not the agent's pull proxy"]],
    [{ HttpProxy: 'http://squid.internal:3129', HttpsProxy: ours }, ["HTTP_PROXY is not the agent's pull proxy"]],
    [{ HttpProxy: ours, HttpsProxy: 'https://127.0.0.1:3129' }, ["HTTPS_PROXY is not the agent's pull proxy"]],
    [{ HttpProxy: ours, HttpsProxy: ours, NoProxy: 'mirror.internal,10.0.0.0/8' }, ["NO_PROXY (mirror.internal,10.0.0.0/8) lets a registry send dockerd there unchecked"]],
  ])('%o', (info, problems) => {
    const found = dockerdProxyProblems(info, 3129);
    expect(found).toHaveLength(problems.length);
    problems.forEach((problem, i) => expect(found[i]).toContain(problem));
  });
});

/** What a test server on loopback saw. */
interface Target {
  port: number;
  connections: number;
  requests: Array<{ url: string; host: string | undefined }>;
}

describe('the pull proxy, with real sockets', () => {
  let echo: Server;
  let web: HttpServer;
  const echoTarget: Target = { port: 0, connections: 0, requests: [] };
  const webTarget: Target = { port: 0, connections: 0, requests: [] };
  let proxy: PullProxy | undefined;

  beforeAll(async () => {
    echo = createServer((socket) => {
      echoTarget.connections++;
      socket.pipe(socket);
    });
    web = createHttpServer((req, res) => {
      webTarget.requests.push({ url: req.url ?? '', host: req.headers.host });
      if (req.url === '/redirect') res.writeHead(307, { location: 'http://169.254.169.254/latest/meta-data/' }).end();
      else res.writeHead(200, { 'content-type': 'text/plain' }).end(`served ${req.method} ${req.url}`);
    });
    web.on('connection', () => webTarget.connections++);
    await Promise.all([new Promise<void>((r) => echo.listen(0, '127.0.0.1', r)), new Promise<void>((r) => web.listen(0, '127.0.0.1', r))]);
    echoTarget.port = (echo.address() as AddressInfo).port;
    webTarget.port = (web.address() as AddressInfo).port;
  });
  afterEach(async () => {
    await proxy?.close();
    proxy = undefined;
    for (const t of [echoTarget, webTarget]) {
      t.connections = 0;
      t.requests = [];
    }
  });
  afterAll(async () => {
    echo.close();
    web.close();
  });

  /** The proxy, listing the given destinations; `registry.test` resolves to loopback, `two.test` first to an address where nothing listens. */
  const start = async (allowed: string[]): Promise<PullProxy> => {
    const names: Record<string, string[]> = { 'registry.test': ['127.0.0.1'], 'two.test': ['127.0.0.2', '127.0.0.1'] };
    proxy = await startPullProxy({ port: 0, log, policy: { allowed, resolve: async (host) => names[host] ?? [] } });
    return proxy;
  };

  /** Sends a CONNECT; the status line, and the socket (open when the tunnel is). */
  const connectThrough = async (p: PullProxy, authority: string): Promise<{ status: string; socket: ReturnType<typeof connect> }> => {
    const socket = connect(p.port, '127.0.0.1');
    socket.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
    let text = '';
    while (!text.includes('\r\n\r\n')) {
      const [chunk] = (await Promise.race([once(socket, 'data'), once(socket, 'end').then(() => [Buffer.alloc(0)])])) as [Buffer];
      if (chunk.length === 0) break;
      text += chunk.toString('latin1');
    }
    return { status: text.split('\r\n')[0]!, socket };
  };

  /** A plain-HTTP request in proxy form (the absolute URL), as dockerd sends for http registries. */
  const getThrough = (p: PullProxy, url: string): Promise<{ status: number; reason: string; body: string; location?: string }> =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const req = request({ host: '127.0.0.1', port: p.port, path: url, headers: { host: target.host } }, (res) => {
        let body = '';
        res.setEncoding('utf8').on('data', (c: string) => (body += c));
        res.on('end', () => resolve({ status: res.statusCode!, reason: res.statusMessage ?? '', body, ...(res.headers.location ? { location: res.headers.location } : {}) }));
      });
      req.on('error', reject).end();
    });

  it('tunnels to a listed registry, to the address it checked, and relays bytes both ways', async () => {
    const p = await start([`registry.test:${echoTarget.port}`]);
    const { status, socket } = await connectThrough(p, `registry.test:${echoTarget.port}`);
    expect(status).toBe('HTTP/1.1 200 Connection Established');
    socket.write('ping');
    const [echoed] = (await once(socket, 'data')) as [Buffer];
    expect(echoed.toString()).toBe('ping');
    socket.destroy();
    expect(echoTarget.connections).toBe(1);
  });

  it("tunnels to a registry's next address when its first does not answer, as dockerd's own dialer would", async () => {
    const p = await start([`two.test:${echoTarget.port}`]);
    const { status, socket } = await connectThrough(p, `two.test:${echoTarget.port}`);
    expect(status).toBe('HTTP/1.1 200 Connection Established');
    socket.write('pong');
    const [echoed] = (await once(socket, 'data')) as [Buffer];
    expect(echoed.toString()).toBe('pong');
    socket.destroy();
    expect(echoTarget.connections).toBe(1);
  });

  it('closes with a tunnel still open', async () => {
    const p = await start([`registry.test:${echoTarget.port}`]);
    const { status, socket } = await connectThrough(p, `registry.test:${echoTarget.port}`);
    expect(status).toBe('HTTP/1.1 200 Connection Established');
    const ended = once(socket, 'close');
    await p.close();
    await ended;
    proxy = undefined;
  });

  it('refuses a tunnel to the host itself, the metadata service, or a name for either, before connecting', async () => {
    const p = await start([]);
    for (const [authority, reason] of [
      [`127.0.0.1:${echoTarget.port}`, `127.0.0.1 is not on a public address (loopback)`],
      [`registry.test:${echoTarget.port}`, `registry.test is not on a public address (loopback)`],
      ['169.254.169.254:80', '169.254.169.254 is not on a public address (link-local)'],
      [`[::1]:${echoTarget.port}`, '::1 is not on a public address (loopback)'],
    ]) {
      const { status, socket } = await connectThrough(p, authority!);
      expect(status).toBe(`HTTP/1.1 403 Refused by the node: ${reason}`);
      socket.destroy();
    }
    expect(echoTarget.connections).toBe(0);
  });

  it('answers 400 to a CONNECT that is not a host and port, and 502 to a name that does not resolve', async () => {
    const p = await start([]);
    const bad = await connectThrough(p, 'registry.test');
    expect(bad.status).toBe('HTTP/1.1 400 Not a host and port');
    bad.socket.destroy();
    const unknown = await connectThrough(p, 'nowhere.test:443');
    expect(unknown.status).toBe('HTTP/1.1 502 Refused by the node: nowhere.test does not resolve');
    unknown.socket.destroy();
  });

  it("forwards a plain-HTTP request to a listed registry with dockerd's Host header, and hands a redirect back unfollowed", async () => {
    const p = await start([`registry.test:${webTarget.port}`]);
    const served = await getThrough(p, `http://registry.test:${webTarget.port}/v2/?x=1`);
    expect(served).toMatchObject({ status: 200, body: 'served GET /v2/?x=1' });
    expect(webTarget.requests).toEqual([{ url: '/v2/?x=1', host: `registry.test:${webTarget.port}` }]);

    const redirected = await getThrough(p, `http://registry.test:${webTarget.port}/redirect`);
    expect(redirected).toMatchObject({ status: 307, location: 'http://169.254.169.254/latest/meta-data/' });
    // The redirect's target is dockerd's next request, checked like any other.
    const followed = await getThrough(p, redirected.location!);
    expect(followed).toMatchObject({ status: 403, reason: 'Refused by the node: 169.254.169.254 is not on a public address (link-local)' });
    expect(webTarget.requests).toHaveLength(2);
  });

  it('refuses a plain-HTTP request to an address that is not public, and one that is not in proxy form', async () => {
    const p = await start([]);
    const refused = await getThrough(p, `http://127.0.0.1:${webTarget.port}/token?scope=x`);
    expect(refused).toMatchObject({ status: 403, reason: 'Refused by the node: 127.0.0.1 is not on a public address (loopback)' });
    const direct = await new Promise<number>((resolve, reject) => {
      request({ host: '127.0.0.1', port: p.port, path: '/v2/' }, (res) => resolve(res.resume().statusCode!))
        .on('error', reject)
        .end();
    });
    expect(direct).toBe(400);
    expect(webTarget.connections).toBe(0);
  });
});
