// Jupyter as a hostile tenant sees it (docs/security.md): a real control plane and agent,
// Docker, Debian's Jupyter in two instances of one node, and headless Chromium as the
// browser of the tenant who is attacked. Tenant A controls everything its Jupyter serves,
// so a script running in a page of A's origin is what A can make B's browser run; the
// suite runs its attacks in such a page (puppeteer's evaluate in A's notebook tab).
import { randomUUID } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebhookReceiver } from '../control-plane/test/webhooks-support.js';
import { JUPYTER_IMAGE, JUPYTER_SELF_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually } from './support/node-agent-process.js';

const SCREENSHOTS = join(import.meta.dirname, '..', '.test-data', 'screenshots');
let stack: InstanceStack;
let receiver: WebhookReceiver;
let readKey: string;
let browser: Browser;
let a: any; // the attacker's instance: Jupyter the agent starts
let b: any; // the victim's instance: an image that runs its own Jupyter
let bReadyAnswer: number; // B's Jupyter API through the proxy, asked the moment B was seen ready

const origin = (url: string): string => new URL(url).origin;
const base = (inst: any): string => {
  const u = new URL(inst.jupyter.url);
  return `${u.origin}${u.pathname}`;
};
const asB = (path: string, init: RequestInit = {}) => fetch(`${base(b)}${path}`, { ...init, headers: { authorization: `token ${b.jupyter.token}`, ...init.headers } });

async function contentsOfB(): Promise<string[]> {
  const res = await asB('api/contents');
  expect(res.status).toBe(200);
  return ((await res.json()) as { content: Array<{ name: string }> }).content.map((c) => c.name).sort();
}

beforeAll(async () => {
  // A generous Jupyter bound: this machine is shared, and a loaded one starts Python slowly.
  stack = await startInstanceStack({ name: 'hostile-jupyter', gpus: 2, agentEnv: { SVC_JUPYTER_START_TIMEOUT_MS: '180000' } });
  const { org } = await stack.cp.app.services.orgs.ensureDefaultOrg();
  readKey = (await stack.cp.app.services.keys.create({ orgId: org.id, scopes: ['compute:read'] })).value;
  receiver = await WebhookReceiver.start();
  const hook = await stack.cp.app.services.webhooks.create({ orgId: org.id, url: receiver.url, eventTypes: ['instance.lifecycle'] });
  receiver.secrets = [hook.secret];
  const created = await Promise.all([JUPYTER_IMAGE, JUPYTER_SELF_IMAGE].map((image) => stack.create({ image })));
  for (const c of created) expect(c.status).toBe(201);
  const [idA, idB] = created.map((c) => c.body.id as string);
  // Watch B closely: the first read that says ready, then at once a request through the proxy.
  b = await eventually(async () => {
    const inst = await stack.read(idB!);
    if (inst.status === 'failed') throw new Error(`instance ${idB} failed: ${inst.failure_reason}`);
    return inst.status === 'ready' ? inst : undefined;
  }, 120_000, 'instance B to be ready');
  expect(b.jupyter_unavailable_reason).toBeNull();
  bReadyAnswer = (await fetch(`${base(b)}api/contents`, { headers: { authorization: `token ${b.jupyter.token}` } })).status;
  a = await stack.waitFor(idA!, ['ready'], 120_000);
  expect(a.jupyter_unavailable_reason).toBeNull();
  browser = await puppeteer.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox'], headless: true });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  await receiver?.stop();
  await stack?.close();
});

/** Tenant B opens its Jupyter as the read says (the URL with the token); then visits A's page. */
async function victimBrowsing(): Promise<{ pageB: Page; pageA: Page }> {
  const context = await browser.createBrowserContext();
  const pageB = await context.newPage();
  expect((await pageB.goto(b.jupyter.url, { waitUntil: 'load' }))?.status()).toBe(200);
  const pageA = await context.newPage();
  // A's tree page: anything A's Jupyter serves (a notebook's JavaScript output, an HTML file) runs here.
  expect((await pageA.goto(a.jupyter.url, { waitUntil: 'load' }))?.status()).toBe(200);
  return { pageB, pageA };
}

describe('Jupyter as a hostile tenant', () => {
  it('serves two instances of one node from two origins', () => {
    expect(a.node_id).toBe(b.node_id);
    expect(origin(a.jupyter.url)).not.toBe(origin(b.jupyter.url));
  });

  it('is ready only when Jupyter answers: an image running its own Jupyter answers through the proxy at ready', () => {
    expect(b.jupyter_unavailable_reason).toBeNull();
    expect(bReadyAnswer).toBe(200);
  });

  it('keeps B\'s notebook out of reach of a page on A\'s origin in B\'s own browser', async () => {
    const { pageB, pageA } = await victimBrowsing();
    const before = await contentsOfB();
    // B's session works in its own tab, with the cookie alone (the token is not in the request).
    const own = await pageB.evaluate(async () => (await fetch('api/contents', { credentials: 'include' })).status);
    expect(own).toBe(200);

    // The browser holds no Jupyter cookie at all, only the proxy's: HttpOnly, one per instance path.
    const cdp = await pageB.createCDPSession();
    const { cookies } = (await cdp.send('Network.getAllCookies')) as { cookies: Array<{ name: string; httpOnly: boolean; path: string; sameSite?: string }> };
    expect(cookies.map((c) => c.name).sort()).toEqual([`svc_jupyter_${a.id}`, `svc_jupyter_${b.id}`].sort());
    expect(cookies.every((c) => c.httpOnly && c.sameSite === 'Strict')).toBe(true);
    expect(cookies.find((c) => c.name === `svc_jupyter_${b.id}`)?.path).toBe(`/${b.id}/`);

    const kernel = (await (await asB('api/kernels', { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).json()) as { id: string };
    const attack = await pageA.evaluate(
      async (bBase: string, kernelId: string, marker: string) => {
        // The page's cookies as its scripts see them (typed loosely: this runs in Chromium, not Node).
        const out: Record<string, unknown> = { cookies: (globalThis as unknown as { document: { cookie: string } }).document.cookie };
        // Read B's files with B's cookie: CORS gives A's script nothing.
        out.read = await fetch(`${bBase}api/contents`, { credentials: 'include' }).then(
          async (r) => `read ${r.status}: ${(await r.text()).slice(0, 200)}`,
          (err: Error) => `blocked: ${err.message}`,
        );
        // Write blind (a simple request needs no preflight): the proxy must refuse it.
        await fetch(`${bBase}api/contents`, { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: JSON.stringify({ type: 'file', ext: `.${marker}` }) }).catch(() => undefined);
        // Run code over B's kernel WebSocket (not covered by CORS).
        out.ws = await new Promise<string>((resolve) => {
          const ws = new WebSocket(`${bBase.replace('http', 'ws')}api/kernels/${kernelId}/channels`);
          ws.onopen = () => {
            ws.close();
            resolve('open');
          };
          ws.onerror = () => resolve('refused');
          setTimeout(() => resolve('no answer'), 10_000);
        });
        return out;
      },
      base(b),
      kernel.id,
      `svc${randomUUID().slice(0, 8)}`,
    );
    const after = await contentsOfB();
    expect({ ...attack, read: String(attack.read).slice(0, 7), planted: after.filter((name) => !before.includes(name)) }).toEqual({ cookies: '', read: 'blocked', ws: 'refused', planted: [] });
    // A's own origin works for A's page: the refusals above are about B, not a broken browser.
    expect(await pageA.evaluate(async () => (await fetch('api/contents', { credentials: 'include' })).status)).toBe(200);
    // What B's browser showed on A's origin, for a person to look at (.test-data/ is ignored by git).
    mkdirSync(SCREENSHOTS, { recursive: true });
    await pageA.screenshot({ path: join(SCREENSHOTS, 'hostile-jupyter-page-a.png') });
    await pageA.browserContext().close();
  }, 60_000);

  it('shows no Jupyter token to a compute:read key, in the read or the list', async () => {
    const asReader = async (path: string) => {
      const res = await fetch(stack.cp.baseUrl + path, { headers: { authorization: `Bearer ${readKey}` } });
      expect(res.status).toBe(200);
      return res.text();
    };
    for (const inst of [a, b]) {
      const raw = await asReader(`/v1/instances/${inst.id}`);
      expect(raw).not.toContain(inst.jupyter.token);
      expect(JSON.parse(raw).jupyter).toEqual({ url: base(inst), token: null, token_redacted: true });
    }
    const list = await asReader('/v1/instances?limit=100');
    for (const inst of [a, b]) expect(list).not.toContain(inst.jupyter.token);
    expect(JSON.parse(list).data.every((i: any) => i.jupyter === null || i.jupyter.token_redacted === true)).toBe(true);
    // The writer's key does see it (the check above can fail).
    expect((await stack.read(a.id)).jupyter.token).toBe(a.jupyter.token);
  });

  it('puts no Jupyter token in instance.lifecycle webhooks', async () => {
    const readyOf = (inst: any) => receiver.requests.find((r) => r.event.data.id === inst.id && r.event.data.status === 'ready');
    await eventually(() => (readyOf(a) && readyOf(b) ? true : undefined), 20_000, 'the ready deliveries of A and B');
    for (const inst of [a, b]) {
      const delivered = readyOf(inst)!;
      expect(delivered.verifiedWith).toHaveLength(1);
      expect(delivered.body).not.toContain(inst.jupyter.token);
      expect(delivered.event.data.jupyter).toEqual({ url: base(inst), token: null, token_redacted: true });
    }
  });
});
