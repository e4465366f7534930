// X-Forwarded-For is believed only from proxies the operator listed (SVC_TRUST_PROXY):
// a client cannot name its own source address to walk past the org's IP allowlist.
// Over a real listening server; the test client on 127.0.0.1 plays the load balancer
// where 127.0.0.1 is trusted.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectError, startControlPlane, type TestControlPlane } from './harness.js';

const ALLOWED = '203.0.113.7';
let direct: TestControlPlane;
let proxied: TestControlPlane;
const keys = new Map<TestControlPlane, string>();

async function start(trustProxy: string[]): Promise<TestControlPlane> {
  const cp = await startControlPlane({ config: { trustProxy } });
  keys.set(cp, await cp.key());
  await cp.app.services.orgs.update(cp.org.id, { ipAllowlist: [`${ALLOWED}/32`] });
  return cp;
}

const models = (cp: TestControlPlane, forwardedFor: string) =>
  cp.request('GET', '/v1/models', { key: keys.get(cp)!, headers: { 'x-forwarded-for': forwardedFor } });

beforeAll(async () => {
  direct = await start([]);
  // The load balancer on loopback, and a second tier inside 10.0.0.0/8.
  proxied = await start(['127.0.0.1/32', '10.0.0.0/8']);
});
afterAll(async () => {
  await direct.close();
  await proxied.close();
});

describe('trusted proxies', () => {
  it('no trusted proxy: a spoofed X-Forwarded-For is ignored, the socket address is judged', async () => {
    const error = expectError(await models(direct, ALLOWED), 403, 'ip_not_allowed');
    expect(error.message).toContain('source address 127.0.0.1 ');
  });

  it('through a trusted proxy: the client address the proxy appended is judged', async () => {
    expect((await models(proxied, ALLOWED)).status).toBe(200);
  });

  it('through a trusted proxy: a left-most address the client wrote itself is not believed', async () => {
    // The client sent "X-Forwarded-For: 203.0.113.7"; the proxy appended the real 198.51.100.9.
    const error = expectError(await models(proxied, `${ALLOWED}, 198.51.100.9`), 403, 'ip_not_allowed');
    expect(error.message).toContain('source address 198.51.100.9 ');
  });

  it('through two trusted hops: the right-most untrusted address is the source', async () => {
    expect((await models(proxied, `198.51.100.9, ${ALLOWED}, 10.1.2.3`)).status).toBe(200);
    const error = expectError(await models(proxied, `${ALLOWED}, 198.51.100.9, 10.1.2.3`), 403, 'ip_not_allowed');
    expect(error.message).toContain('198.51.100.9');
  });
});
