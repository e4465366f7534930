// Jupyter in instances end to end: a real control plane and agent, and Debian's
// jupyter-notebook in a test image (scripts/setup-host.sh builds and caches it). The
// agent starts Jupyter in an image that has it, serves each instance's Jupyter on a port
// (an origin) of its own, proxies HTTP and WebSocket to it behind the instance's token,
// and says why when an image has none. Hostile-tenant cases: hostile-jupyter.e2e.test.ts.
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JUPYTER_HANG_IMAGE, JUPYTER_IMAGE, JUPYTER_SELF_IMAGE, JUPYTER_SILENT_IMAGE, SLEEPER_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';

let stack: InstanceStack;
let nb: any; // the instance whose Jupyter the agent started
let self: any; // the instance whose image runs Jupyter itself
let plain: any; // busybox: no Jupyter

/** The URL's origin and path without the token, and the token. */
const parts = (url: string) => {
  const u = new URL(url);
  return { base: `${u.origin}${u.pathname}`, token: u.searchParams.get('token')! };
};

/** Runs `code` in a kernel over its WebSocket channel (Jupyter messaging protocol 5.3); resolves with text/plain. */
function execute(channelsUrl: string, code: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(channelsUrl);
    const session = randomUUID();
    const msgId = randomUUID();
    const timer = setTimeout(() => {
      ws.terminate();
      reject(new Error(`no execute_result for ${code} within 30 s`));
    }, 30_000);
    ws.on('open', () =>
      ws.send(
        JSON.stringify({
          header: { msg_id: msgId, username: 'e2e', session, msg_type: 'execute_request', version: '5.3', date: new Date().toISOString() },
          parent_header: {},
          metadata: {},
          content: { code, silent: false, store_history: true, user_expressions: {}, allow_stdin: false, stop_on_error: true },
          channel: 'shell',
          buffers: [],
        }),
      ),
    );
    ws.on('message', (data) => {
      const message = JSON.parse(String(data));
      if (message.parent_header?.msg_id === msgId && message.msg_type === 'execute_result') {
        clearTimeout(timer);
        ws.close();
        resolve(message.content.data['text/plain']);
      }
    });
    ws.on('unexpected-response', (_req, res) => {
      clearTimeout(timer);
      reject(new Error(`WebSocket refused with HTTP ${res.statusCode}`));
    });
    ws.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
  });
}

beforeAll(async () => {
  // A generous Jupyter bound: this machine is shared, and a loaded one starts Python slowly.
  // A range as a provider configures it (below Linux's ephemeral ports, so no client socket takes them).
  const firstPort = 20_000 + Math.floor(Math.random() * 10_000);
  stack = await startInstanceStack({
    name: 'jupyter-e2e',
    gpus: 3,
    agentEnv: { SVC_JUPYTER_START_TIMEOUT_MS: '180000', SVC_JUPYTER_PORT: String(firstPort), SVC_JUPYTER_PORT_COUNT: '20' },
  });
  const created = await Promise.all([JUPYTER_IMAGE, JUPYTER_SELF_IMAGE, SLEEPER_IMAGE].map((image) => stack.create({ image })));
  for (const c of created) {
    expect(c.status).toBe(201);
    expect(c.body.jupyter).toBeNull(); // not before ready
  }
  [nb, self, plain] = await Promise.all(created.map((c) => stack.waitFor(c.body.id, ['ready'], 120_000)));
}, 180_000);

afterAll(async () => {
  await stack?.close();
});

describe('Jupyter in instances', () => {
  it('is live at ready: the read has a URL with the token, on a port of the instance\'s own', async () => {
    const { base, token } = parts(nb.jupyter.url);
    expect(base).toMatch(new RegExp(`^http://127\\.0\\.0\\.1:\\d+/${nb.id}/$`));
    expect(new URL(nb.jupyter.url).port).not.toBe(new URL(self.jupyter.url).port);
    expect(token).toBe(nb.jupyter.token);
    expect(nb.jupyter.token_redacted).toBe(false); // the suite's key has compute:write
    expect(token.length).toBeGreaterThanOrEqual(32);
    expect(nb.jupyter_unavailable_reason).toBeNull();
    // The page a browser opens from the URL: the notebook's tree.
    const page = await fetch(nb.jupyter.url);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Jupyter');
  });

  it('requires the token', async () => {
    const { base, token } = parts(nb.jupyter.url);
    const none = await fetch(`${base}api/kernels`);
    expect(none.status).toBe(401);
    expect(((await none.json()) as { error: { type: string } }).error.type).toBe('unauthorized');
    expect((await fetch(`${base}api/kernels?token=${token.slice(0, -1)}x`)).status).toBe(401);
    expect((await fetch(`${base}api/kernels`, { headers: { authorization: `token ${self.jupyter.token}` } })).status).toBe(401); // another instance's token
    expect((await fetch(`${base}api/kernels`, { headers: { authorization: `token ${token}` } })).status).toBe(200);
    // WebSockets too.
    await expect(execute(`${base.replace('http', 'ws')}api/kernels/any/channels`, '1')).rejects.toThrow(/HTTP 401/);
  });

  it('lists kernels, and a kernel runs 1+1 over its WebSocket', async () => {
    const { base, token } = parts(nb.jupyter.url);
    const headers = { authorization: `token ${token}`, 'content-type': 'application/json' };
    const started = await fetch(`${base}api/kernels`, { method: 'POST', headers, body: '{}' });
    expect(started.status).toBe(201);
    const kernel = (await started.json()) as { id: string; name: string };
    expect(kernel.name).toBe('python3');
    const listed = (await (await fetch(`${base}api/kernels`, { headers })).json()) as Array<{ id: string }>;
    expect(listed.map((k) => k.id)).toContain(kernel.id);
    expect(await execute(`${base.replace('http', 'ws')}api/kernels/${kernel.id}/channels?token=${token}`, '1+1')).toBe('2');
  });

  it('lets a browser carry on with the cookie it got with the token; Jupyter\'s own cookies stay behind the proxy', async () => {
    const { base, token } = parts(nb.jupyter.url);
    const page = await fetch(`${base}tree?token=${token}`, { redirect: 'manual' });
    expect(page.status).toBe(200);
    const setCookies = page.headers.getSetCookie();
    // Only the proxy's cookie: Jupyter's (_xsrf, username-...) would reach every port of the host.
    expect(setCookies).toHaveLength(1);
    expect(setCookies[0]).toMatch(new RegExp(`^svc_jupyter_${nb.id}=[^;]+; Path=/${nb.id}/; HttpOnly; SameSite=Strict$`));
    expect(await page.text()).toContain('Jupyter');
    const cookies = setCookies.map((c) => c.split(';')[0]).join('; ');
    // What the page's scripts then ask for: cookies, no token (a browser sends the page as referer).
    const next = await fetch(`${base}api/contents`, { headers: { cookie: cookies, referer: `${base}tree` } });
    expect(next.status).toBe(200);
    expect(((await next.json()) as { type: string }).type).toBe('directory');
    // Without the proxy's cookie the same request does not get through.
    const without = await fetch(`${base}api/contents`, { headers: { cookie: 'other=1', referer: `${base}tree` } });
    expect(without.status).toBe(401);
    await without.arrayBuffer();
    // The cookie works only from the instance's own origin (a page on another port is another tenant's).
    const foreign = await fetch(`${base}api/contents`, { headers: { cookie: cookies, origin: self.jupyter.url.replace(/\/inst_.*$/, '') } });
    expect(foreign.status).toBe(403);
    expect(((await foreign.json()) as { error: { type: string } }).error.type).toBe('forbidden');
  });

  it('reaches a Jupyter the image runs itself', async () => {
    const { base, token } = parts(self.jupyter.url);
    const res = await fetch(`${base}api/kernels`, { headers: { authorization: `token ${token}` } });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual([]);
    expect((await fetch(`${base}api/kernels`)).status).toBe(401);
  });

  it('says why when the image has no Jupyter', () => {
    expect(plain.jupyter).toBeNull();
    expect(plain.jupyter_unavailable_reason).toMatch(/the image has no Jupyter/);
  });

  it('keeps each instance\'s Jupyter URL across an agent restart', async () => {
    const before = { nb: nb.jupyter.url, self: self.jupyter.url };
    await stack.restartAgent();
    for (const [inst, url] of [[nb, before.nb], [self, before.self]] as const) {
      const read = await stack.read(inst.id);
      expect(read.jupyter.url).toBe(url);
      const { base, token } = parts(url);
      const res = await fetch(`${base}api/kernels`, { headers: { authorization: `token ${token}` } });
      expect(res.status).toBe(200);
      await res.arrayBuffer();
    }
  });

  it('goes offline when the instance terminates, open WebSockets included', async () => {
    const { base, token } = parts(nb.jupyter.url);
    const headers = { authorization: `token ${token}`, 'content-type': 'application/json' };
    const kernel = (await (await fetch(`${base}api/kernels`, { method: 'POST', headers, body: '{}' })).json()) as { id: string };
    const ws = new WebSocket(`${base.replace('http', 'ws')}api/kernels/${kernel.id}/channels?token=${token}`);
    await new Promise((resolve, reject) => ws.once('open', resolve).once('error', reject));
    const closed = new Promise((resolve) => ws.once('close', resolve));
    await stack.api('POST', `/v1/instances/${nb.id}/terminate`, { force: true });
    await closed;
    const done = await stack.waitFor(nb.id, ['terminated']);
    expect(done.jupyter).toBeNull();
    // Its port is given back: nothing answers there (or, reused by a later instance, not this one).
    const gone = await fetch(`${base}api/kernels`, { headers: { authorization: `token ${token}` } }).then((r) => r.status, () => 'refused');
    expect(['refused', 404]).toContain(gone);
  });
});

describe('a Jupyter that never answers', () => {
  let silent: InstanceStack;
  beforeAll(async () => {
    silent = await startInstanceStack({ name: 'jupyter-silent-e2e', gpus: 2, agentEnv: { SVC_JUPYTER_START_TIMEOUT_MS: '3000' } });
  }, 60_000);
  afterAll(async () => {
    await silent?.close();
  });

  it('does not hold the instance back: ready after the bound, without Jupyter, saying why', async () => {
    const { status, body } = await silent.create({ image: JUPYTER_SILENT_IMAGE });
    expect(status).toBe(201);
    const ready = await silent.waitFor(body.id, ['ready'], 60_000);
    expect(ready.jupyter).toBeNull();
    expect(ready.jupyter_unavailable_reason).toMatch(/^Jupyter did not answer through the proxy within 3 s/);
    expect(ready.ssh).not.toBeNull(); // the other endpoint is there
  }, 90_000);

  it("nor do the image's own jupyter programs that print without end or never end: ready within the bound, and the node goes on", async () => {
    const { status, body } = await silent.create({ image: JUPYTER_HANG_IMAGE });
    expect(status).toBe(201);
    const ready = await silent.waitFor(body.id, ['ready'], 60_000);
    expect(ready.jupyter).toBeNull();
    expect(ready.jupyter_unavailable_reason).toBe('setting up Jupyter took longer than 3 s');
    // Held back, its `running` report would also have held back every later report of the instance.
    expect((await silent.api('POST', `/v1/instances/${body.id}/terminate`)).body.status).toBe('draining');
    await silent.waitFor(body.id, ['terminated'], 60_000);
  }, 90_000);
});
