// The error envelope for each kind of bad input, over a real listening server.
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

let cp: TestControlPlane;
let admin: string;

beforeAll(async () => {
  cp = await startControlPlane({ config: { bodyLimitBytes: 2048 } });
  admin = await cp.key({ admin: true });
});
afterAll(() => cp.close());

describe('error envelope', () => {
  it('unknown route: 404 not_found', async () => {
    expectError(await cp.request('GET', '/v1/nothing-here', { key: admin }), 404, 'not_found');
    expectError(await cp.request('GET', '/nothing'), 404, 'not_found');
  });

  it('wrong method: 405 method_not_allowed with Allow', async () => {
    const res = await cp.request('DELETE', '/v1/models', { key: admin });
    expectError(res, 405, 'method_not_allowed');
    expect(res.headers.get('allow')).toBe('GET');
    const put = await cp.request('PUT', '/v1/admin/keys/key_1/revoke', { key: admin });
    expectError(put, 405, 'method_not_allowed');
    expect(put.headers.get('allow')).toBe('POST');
  });

  it('malformed JSON: 400 invalid_request', async () => {
    const res = await cp.request('POST', '/v1/admin/keys', {
      key: admin,
      rawBody: '{"name": "x",',
      headers: { 'content-type': 'application/json' },
    });
    expect(expectError(res, 400, 'invalid_request').message).toContain('malformed JSON');
  });

  it('prototype poisoning in JSON: 400, not accepted', async () => {
    const res = await cp.request('POST', '/v1/admin/keys', {
      key: admin,
      rawBody: '{"__proto__": {"admin": true}}',
      headers: { 'content-type': 'application/json' },
    });
    expectError(res, 400, 'invalid_request');
  });

  it('wrong content type: 415 unsupported_media_type', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded']) {
      const res = await cp.request('POST', '/v1/admin/keys', { key: admin, rawBody: 'name=x', headers: { 'content-type': type } });
      expectError(res, 415, 'unsupported_media_type');
    }
  });

  it('compressed body: 415 unsupported_media_type, never read as if it were plain', async () => {
    const json = JSON.stringify({ name: 'compressed' });
    const post = (body: Buffer | string, encoding: string) =>
      fetch(`${cp.baseUrl}/v1/admin/keys`, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json', 'content-encoding': encoding }, body });
    for (const [body, encoding] of [[gzipSync(json), 'gzip'], [json, 'gzip'], [json, 'br']] as const) {
      const res = await post(body, encoding);
      expect(res.status).toBe(415);
      expect(await res.json()).toEqual({ error: { type: 'unsupported_media_type', message: `Content-Encoding ${encoding} is not accepted: send the JSON body uncompressed` } });
    }
    expect((await post(json, 'identity')).status).toBe(201);
  });

  it('oversized body: 413 payload_too_large', async () => {
    const res = await cp.request('POST', '/v1/admin/keys', { key: admin, body: { name: 'x'.repeat(4096) } });
    expectError(res, 413, 'payload_too_large');
  });

  it('unknown field: 400 "unsupported field" with param', async () => {
    const error = expectError(await cp.request('POST', '/v1/admin/keys', { key: admin, body: { name: 'x', colour: 'red' } }), 400, 'invalid_request');
    expect(error.message).toBe('unsupported field: colour');
    expect(error.param).toBe('colour');
    const query = expectError(await cp.request('GET', '/v1/models?colour=red', { key: admin }), 400, 'invalid_request');
    expect(query.param).toBe('colour');
  });

  it('wrong type: 400 with param', async () => {
    const error = expectError(await cp.request('POST', '/v1/admin/keys', { key: admin, body: { admin: 'yes' } }), 400, 'invalid_request');
    expect(error.param).toBe('admin');
    const nested = expectError(await cp.request('POST', '/v1/admin/keys', { key: admin, body: { scopes: ['inference:read', 7] } }), 400, 'invalid_request');
    expect(nested.param).toBe('scopes[1]');
    const notObject = expectError(await cp.request('POST', '/v1/admin/keys', { key: admin, body: [1, 2] }), 400, 'invalid_request');
    expect(notObject.message).toContain('JSON object');
  });

  it('out-of-range and invalid values: 400 with param', async () => {
    const target = (await cp.app.services.keys.create({ orgId: cp.org.id })).record.id;
    const rotate = (overlap: unknown) =>
      cp.request('POST', `/v1/admin/keys/${target}/rotate`, { key: admin, body: { overlap_seconds: overlap } });
    expect(expectError(await rotate(-1), 400, 'invalid_request').param).toBe('overlap_seconds');
    expect(expectError(await rotate(10 ** 9), 400, 'invalid_request').param).toBe('overlap_seconds');
    expect(expectError(await rotate(1.5), 400, 'invalid_request').param).toBe('overlap_seconds');
    const pool = expectError(await cp.request('GET', '/v1/models?pool=mars', { key: admin }), 400, 'invalid_request');
    expect(pool).toMatchObject({ param: 'pool' });
    expect(pool.message).toContain('na, eu, apac');
  });

  it('missing required field: 400 naming it', async () => {
    const res = await cp.request('PATCH', '/v1/admin/org', { key: admin, body: { ip_allowlist: 'x' } });
    expect(expectError(res, 400, 'invalid_request').param).toBe('ip_allowlist');
  });

  it('OPTIONS that is not a CORS preflight: 405 with Allow, or 404, in the envelope', async () => {
    const known = await cp.request('OPTIONS', '/v1/models', { key: admin });
    expectError(known, 405, 'method_not_allowed');
    expect(known.headers.get('content-type')).toMatch(/^application\/json/);
    expect(known.headers.get('allow')).toBe('GET');
    expectError(await cp.request('OPTIONS', '/v1/nothing-here', { key: admin }), 404, 'not_found');
    // Origin without Access-Control-Request-Method is not a preflight either.
    expectError(await cp.request('OPTIONS', '/v1/models', { headers: { origin: 'https://app.example' } }), 405, 'method_not_allowed');
    // A real browser preflight still gets its CORS answer.
    const preflight = await cp.request('OPTIONS', '/v1/chat/completions', {
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization' },
    });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe('https://app.example');
    // What the official SDK sends from a browser on every request: allowed, or the browser
    // would block every call (the SDK sees an APIConnectionError).
    const sdkHeaders = 'authorization, content-type, x-stainless-lang, x-stainless-package-version, x-stainless-os, x-stainless-arch, x-stainless-runtime, x-stainless-runtime-version, x-stainless-retry-count, x-stainless-timeout, openai-organization, openai-project';
    const fromSdk = await cp.request('OPTIONS', '/v1/embeddings', { headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': sdkHeaders } });
    expect(fromSdk.status).toBe(204);
    const allowed = (fromSdk.headers.get('access-control-allow-headers') ?? '').toLowerCase().split(/\s*,\s*/);
    for (const header of sdkHeaders.split(', ')) expect(allowed).toContain(header);
  });

  it('a cross-origin request is answered for the browser, refusals included: its origin reflected, the readable headers listed, Vary: Origin', async () => {
    for (const [path, key, status] of [['/v1/models', admin, 200], ['/v1/models', undefined, 401], ['/v1/nothing-here', admin, 404]] as const) {
      const res = await cp.request('GET', path, { ...(key ? { key } : {}), headers: { origin: 'https://app.example' } });
      expect(res.status, path).toBe(status);
      expect(res.headers.get('access-control-allow-origin'), path).toBe('https://app.example');
      expect(res.headers.get('vary'), path).toMatch(/\bOrigin\b/);
      expect(res.headers.get('access-control-expose-headers'), path).toContain('x-ratelimit-remaining-requests');
    }
    // Without an Origin there is nothing to reflect, and no browser to tell which headers
    // it may read (a server-side client is sent 300 bytes fewer on every response).
    const local = await cp.request('GET', '/v1/models', { key: admin });
    expect(local.headers.get('access-control-allow-origin')).toBeNull();
    expect(local.headers.get('access-control-expose-headers')).toBeNull();
    expect(local.headers.get('vary')).toMatch(/\bOrigin\b/);
  });

  it('a path that is not valid percent-encoding, or a path parameter past 100 characters: 400 invalid_request', async () => {
    const bad = await raw('GET', '/v1/instances/%ff', { authorization: `Bearer ${admin}` });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ type: 'invalid_request', message: expect.stringContaining('percent-encoded') });
    expect(bad.contentType).toMatch(/^application\/json/);
    const long = await raw('GET', `/v1/instances/${'a'.repeat(200)}`, { authorization: `Bearer ${admin}` });
    expect(long.status).toBe(400);
    expect(long.body.error).toMatchObject({ type: 'invalid_request', message: expect.stringContaining('longer than 100 characters') });
  });

  it('a query string or a header over 16 KB: 431 headers_too_large in the envelope', async () => {
    for (const [path, headers] of [
      [`/v1/models?q=${'a'.repeat(20_000)}`, {}],
      ['/v1/models', { 'x-padding': 'b'.repeat(20_000) }],
    ] as const) {
      const res = await raw('GET', path, { authorization: `Bearer ${admin}`, ...headers });
      expect(res.status).toBe(431);
      expect(res.contentType).toMatch(/^application\/json/);
      expect(res.body.error).toMatchObject({ type: 'headers_too_large', message: expect.stringContaining('16 KB') });
    }
    // The server keeps answering.
    expect((await cp.request('GET', '/healthz')).status).toBe(200);
  });

  it('an answer sent before the body was read closes the connection: nobody can keep the server reading an endless body', async () => {
    /** Sends the head, then 64 KiB chunks without end; the status line and what was sent once the server closed (or 5 s passed). */
    const endless = async (head: string): Promise<{ status: string; sentMiB: number; closed: boolean }> => {
      const url = new URL(cp.baseUrl);
      const socket = connect(Number(url.port), url.hostname);
      socket.on('error', () => undefined);
      await new Promise((resolve) => socket.once('connect', resolve));
      socket.write(`${head}Host: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`);
      const chunk = Buffer.concat([Buffer.from('10000\r\n'), Buffer.alloc(0x10000, 0x20), Buffer.from('\r\n')]);
      let answer = '';
      let sent = 0;
      socket.on('data', (b: Buffer) => (answer += b.toString('latin1')));
      const closed = new Promise<boolean>((resolve) => socket.once('close', () => resolve(true)));
      const pump = setInterval(() => socket.writable && (sent += chunk.length) && socket.write(chunk), 1);
      try {
        const wasClosed = await Promise.race([closed, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000))]);
        return { status: answer.slice(0, answer.indexOf('\r\n')), sentMiB: sent / 2 ** 20, closed: wasClosed };
      } finally {
        clearInterval(pump);
        socket.destroy();
      }
    };
    for (const [head, status] of [
      ['POST /v1/chat/completions HTTP/1.1\r\n', 'HTTP/1.1 401 Unauthorized'], // no key at all
      ['POST /v1/no/such/route HTTP/1.1\r\n', 'HTTP/1.1 413 Payload Too Large'], // parsed up to the body limit before the 404
      [`GET /v1/models HTTP/1.1\r\nAuthorization: Bearer ${admin}\r\n`, 'HTTP/1.1 200 OK'], // a body a GET never reads
    ]) {
      const outcome = await endless(head!);
      expect(outcome, head).toMatchObject({ status, closed: true });
      expect(outcome.sentMiB, head).toBeLessThan(64);
    }
    // A request whose body was read keeps its connection for the next one.
    const agent = new (await import('node:http')).Agent({ keepAlive: true, maxSockets: 1 });
    const sockets = new Set<unknown>();
    for (let i = 0; i < 2; i++) {
      await new Promise<void>((resolve, reject) => {
        const req = httpRequest(`${cp.baseUrl}/v1/admin/keys`, { method: 'POST', agent, headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' } }, (res) => {
          expect(res.statusCode).toBe(201);
          expect(res.headers.connection).not.toBe('close');
          sockets.add(res.socket);
          res.resume().on('end', resolve);
        });
        req.on('error', reject);
        req.end(JSON.stringify({ name: `kept-${i}` }));
      });
    }
    agent.destroy();
    expect(sockets.size).toBe(1);
  }, 30_000);

  it('a malformed request line: 400 invalid_request in the envelope', async () => {
    const url = new URL(cp.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    socket.end('GET /v1/models HTTP/1.1\r\nHost: x\r\nbad header: x\r\n\r\n');
    let answer = '';
    for await (const chunk of socket) answer += String(chunk);
    const [head, body] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 400 /);
    expect(head).toMatch(/content-type: application\/json/i);
    expect(JSON.parse(body!).error).toMatchObject({ type: 'invalid_request', message: expect.stringContaining('malformed HTTP request') });
  });

  it('a request arriving while the server shuts down: 503 service_unavailable in the envelope, connection closed', async () => {
    const closing = await startControlPlane();
    const key = await closing.key({ admin: true });
    const url = new URL(closing.baseUrl);
    const socket = connect(Number(url.port), url.hostname);
    let answer = '';
    socket.on('data', (chunk) => (answer += String(chunk)));
    const ended = new Promise((resolve) => socket.once('close', resolve));
    await new Promise((resolve) => socket.once('connect', resolve));
    // A request in flight (its body half sent) keeps the connection busy while the server closes...
    const body = '{"name":"x"}';
    socket.write(`POST /v1/admin/keys HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.slice(0, 3)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
    const closed = closing.app.close();
    // ...then the rest of it and a second request on the same connection.
    socket.write(`${body.slice(3)}GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${key}\r\n\r\n`);
    await ended;
    await closed;
    const answers = answer.split(/(?=HTTP\/1\.1 \d{3} )/);
    const last = answers.at(-1)!;
    expect(last).toMatch(/^HTTP\/1\.1 503 /);
    expect(last).toMatch(/\r\nconnection: close\r\n/i);
    expect(last).toMatch(/\r\ncontent-type: application\/json/i);
    expect(last).toMatch(/\r\nx-request-id: req_/i);
    expect(JSON.parse(last.split('\r\n\r\n')[1]!).error).toMatchObject({ type: 'service_unavailable', message: expect.stringContaining('shutting down') });
  });

  it('every error carries the request id header', async () => {
    const res = await cp.request('GET', '/v1/nothing', { headers: { 'x-request-id': 'trace-abc-12345' } });
    expect(res.headers.get('x-request-id')).toBe('trace-abc-12345');
  });

  it('an internal failure is a 500 internal_error that leaks nothing', async () => {
    const broken = await startControlPlane();
    const key = await broken.key({ admin: true });
    broken.store.db.close();
    const res = await broken.request('GET', '/v1/admin/keys', { key });
    const error = expectError(res, 500, 'internal_error');
    expect(error.message).toContain(res.headers.get('x-request-id')!);
    expect(error.message).not.toMatch(/database|sqlite|stack|at /i);
    await broken.app.close();
  });
});

/** A request over node:http, which sends paths and headers exactly as given (fetch would normalize them). */
function raw(method: string, path: string, headers: Record<string, string>): Promise<{ status: number; contentType: string | undefined; body: any }> {
  const url = new URL(cp.baseUrl);
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: url.hostname, port: url.port, method, path, headers, insecureHTTPParser: true }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, contentType: res.headers['content-type'], body: JSON.parse(text) }));
    });
    req.on('error', reject);
    req.end();
  });
}
