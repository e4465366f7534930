// The status pages end to end, as people see them in a browser (headless Chromium via
// puppeteer-core): a real control plane (SQLite, gRPC gateway, the operators' listener)
// and a real agent process with 4 GPUs from the fake libnvidia-ml, running a tenant's
// instance (real Docker) and a CPU-engine replica. The tenant named its org and labelled
// its instance with markup, and the node reports a hostname with markup: the pages must
// show all of it as text. Screenshots land in test-output/status-*.png (gitignored).
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultControlPlaneConfig } from '../control-plane/src/config.js';
import { startControlPlane } from '../control-plane/src/server.js';
import { fakeGpuNode, type FakeGpuNode } from './support/fake-gpu-node.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { eventually, freePort, removeNodeContainers, ROOT, whileAgentStarts, type AgentProcess } from './support/node-agent-process.js';

// The page's globals, for the functions puppeteer runs inside the page (the project's
// TypeScript has no DOM library; these declarations are local to this module).
interface PageElement {
  innerText: string;
  getAttribute(name: string): string | null;
}
declare const document: { querySelector(selector: string): PageElement | null; querySelectorAll(selector: string): Iterable<PageElement> & { length: number } };
declare const window: { sameDocument?: boolean; __xss?: string };
declare function getComputedStyle(element: PageElement): { backgroundColor: string };

const GPUS = 4;
const GREEN = 'rgb(30, 142, 62)';
const RED = 'rgb(217, 48, 37)';
const HOSTNAME = `gpu-node-7"><svg onload="window.__xss='host'">`;
const ORG_NAME = `acme<script>window.__xss='org'</script>`;
const LABEL = `<img src=x onerror="window.__xss='label'">`;
const OUTPUT = join(ROOT, 'test-output');

const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'status-pages-'));
let cp: Awaited<ReturnType<typeof startControlPlane>>;
let node: FakeGpuNode;
let agent: AgentProcess;
let browser: Browser;
let nodeId = '';
let orgId = '';
let instanceId = '';
let gpuIndex = -1;
let gpuUuid = '';

async function screenshot(page: Page, name: string): Promise<void> {
  const path = join(OUTPUT, `status-${name}.png`);
  await page.screenshot({ path, fullPage: true });
  console.log(`screenshot: ${path}`);
}

// Each read queries and reads in one evaluation: the page swaps its content every few
// hundred milliseconds, and an element found in one round trip may be gone by the next.

/** The background colour a person sees on GPU square `index`. */
const squareColour = (page: Page, index: number): Promise<string> =>
  page.evaluate((i: number) => {
    const el = document.querySelector(`.gpu[data-gpu-index="${i}"]`);
    return el ? getComputedStyle(el).backgroundColor : 'no such square';
  }, index);

/** The text a person sees in the first element matching `selector`. */
const text = (page: Page, selector: string): Promise<string> =>
  page.evaluate((sel: string) => document.querySelector(sel)?.innerText ?? `nothing matches ${sel}`, selector);

/** The texts of every element matching `selector`. */
const texts = (page: Page, selector: string): Promise<string[]> =>
  page.evaluate((sel: string) => [...document.querySelectorAll(sel)].map((el) => el.innerText), selector);

/** An attribute of the first element matching `selector`. */
const attribute = (page: Page, selector: string, name: string): Promise<string | null> =>
  page.evaluate((sel: string, n: string) => document.querySelector(sel)?.getAttribute(n) ?? null, selector, name);

/** GET with a Host header of our choosing (fetch will not send one). */
function getWithHost(url: string, host: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { headers: { host } }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

beforeAll(async () => {
  mkdirSync(OUTPUT, { recursive: true });
  node = await fakeGpuNode(dir, 'status-pages', GPUS);
  const config = defaultControlPlaneConfig({
    dataDir: join(dir, 'cp'),
    httpPort: 0,
    grpcPort: await freePort(),
    operatorMetricsPort: await freePort(),
    operatorStatusRefreshMs: 300,
    statusCacheMs: 300,
    reportIntervalMs: 300,
    nodeDeadlineMs: 5_000,
    terminationGraceMs: 1_000,
    // One replica the node can run (the CPU engine), one wanted in a pool with no nodes.
    replicas: 'tiny-chat:int4:na=1,tiny-embed:int4:eu=1',
    replicaReconcileMs: 200,
    replicaStopGraceMs: 1_000,
    logLevel: 'warn',
  });
  cp = await startControlPlane(config);
  const { org } = await cp.app.services.orgs.ensureDefaultOrg();
  orgId = org.id;
  // Org names are validated by the service today, but a page must not trust that: rows
  // written by older versions (or by hand) reach it too, so the hostile name goes in
  // through the store.
  await cp.store.orgs.update(orgId, { name: ORG_NAME });
  agent = node.spawn(config.grpcPort, (await cp.app.services.enrollment.createToken()).value, {
    SVC_AGENT_HOSTNAME: HOSTNAME,
    SVC_REPLICA_HEALTH_INTERVAL_MS: '200',
  });
  nodeId = await whileAgentStarts(
    agent,
    async () => {
      const [n] = await cp.app.services.nodes.list();
      return n && n.gpus.length === GPUS && n.gpus.every((g) => g.sample !== null) ? n.node.id : undefined;
    },
    60_000,
    `the node with ${GPUS} sampled GPUs`,
  );

  const key = (await cp.app.services.keys.create({ orgId, scopes: ['compute:write', 'compute:read'] })).value;
  const created = await fetch(`${cp.baseUrl}/v1/instances`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ sku: 'h100-80gb', gpus: 1, image: SLEEPER_IMAGE, labels: { name: LABEL, team: 'ml' } }),
  });
  const body = (await created.json()) as { id: string };
  expect(created.status, JSON.stringify(body)).toBe(201);
  instanceId = body.id;
  await eventually(async () => (await cp.store.instances.get(instanceId))?.status === 'ready', 60_000, 'the instance ready');
  gpuUuid = (await cp.store.instances.get(instanceId))!.gpuUuids[0]!;
  gpuIndex = (await cp.store.nodes.listGpus(nodeId)).find((g) => g.uuid === gpuUuid)!.index;
  await eventually(() => cp.app.services.replicaDirectory.ready().length === 1, 90_000, 'the tiny-chat replica running');

  browser = await puppeteer.launch({
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}, 240_000);

afterAll(async () => {
  await browser?.close();
  if (agent && agent.child.exitCode === null && agent.child.signalCode === null) agent.child.kill('SIGKILL');
  if (nodeId) await removeNodeContainers(docker, nodeId);
  await cp?.app.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the operators' status page", () => {
  let page: Page;

  beforeAll(async () => {
    page = await browser.newPage();
    await page.setViewport({ width: 1280, height: 1000 });
    await page.goto(cp.operatorStatusUrl!, { waitUntil: 'load' });
    // Set once; a reload would lose it.
    await page.evaluate(() => (window.sameDocument = true));
  });
  // An open page keeps polling the operators' listener, which reads the same store.
  afterAll(() => page.close());

  it('shows the pool, a green square per GPU, and the instance with its org; markup chosen by a tenant or a node is only text', async () => {
    expect(await text(page, '[data-pool="na"] h2')).toBe('Pool na');
    for (let i = 0; i < GPUS; i++) expect(await squareColour(page, i), `GPU ${i}`).toBe(GREEN);
    expect(await text(page, '.node .hostname')).toBe(HOSTNAME);
    const row = `.workload-instance[data-id="${instanceId}"]`;
    expect(await text(page, `${row} .org`)).toBe(ORG_NAME);
    expect(await text(page, `${row} .detail`)).toBe(`name=${LABEL}, team=ml`);
    expect(await text(page, '.workload-replica .detail')).toBe('tiny-chat int4');
    expect(await text(page, '[data-pool="na"] .gpus-used')).toBe('1');
    expect(await text(page, '[data-pool="na"] .replicas')).toBe('1 / 1');
    // Nothing the tenant or the node wrote became an element or ran.
    expect(await page.evaluate(() => window.__xss)).toBeUndefined();
    expect(await page.evaluate(() => document.querySelectorAll('#fleet img, #fleet svg, #fleet script').length)).toBe(0);
    await screenshot(page, 'operator-healthy');
  });

  it('turns the failing GPU red without a reload, with the XID, its meaning, the recommended action and the affected instance', async () => {
    node.gpuState.injectXid(gpuIndex, 48);
    await page.waitForFunction(
      (i: number, red: string) => {
        const el = document.querySelector(`.gpu[data-gpu-index="${i}"]`);
        return el !== null && getComputedStyle(el).backgroundColor === red;
      },
      { timeout: 20_000 },
      gpuIndex,
      RED,
    );
    expect(await page.evaluate(() => window.sameDocument)).toBe(true);
    for (let i = 0; i < GPUS; i++) if (i !== gpuIndex) expect(await squareColour(page, i), `GPU ${i}`).toBe(GREEN);
    const event = '#fleet-timeline tr.event-xid';
    expect(await text(page, `${event} .event-name`)).toBe('XID 48');
    expect(await text(page, `${event} .meaning`)).toBe('double-bit ECC error');
    expect(await text(page, `${event} .action`)).toBe('reset the GPU');
    expect(await text(page, `${event} .affected`)).toBe(instanceId);
    expect(await text(page, '[data-pool="na"] .gpus-unhealthy')).toBe('1');
    expect(await attribute(page, `.gpu[data-gpu-index="${gpuIndex}"]`, 'title')).toContain(`held by ${instanceId}`);
    await screenshot(page, 'operator-xid48');
  });

  it('turns it green again when an operator resets its health, still without a reload', async () => {
    await cp.app.services.nodes.requestGpuHealthReset(nodeId, gpuUuid);
    await page.waitForFunction(
      (i: number, green: string) => {
        const el = document.querySelector(`.gpu[data-gpu-index="${i}"]`);
        return el !== null && getComputedStyle(el).backgroundColor === green;
      },
      { timeout: 20_000 },
      gpuIndex,
      GREEN,
    );
    expect(await page.evaluate(() => window.sameDocument)).toBe(true);
    expect(await texts(page, '#fleet-timeline tr.event .event-name')).toContain('recovered');
    expect(await text(page, '[data-pool="na"] .gpus-unhealthy')).toBe('0');
    await screenshot(page, 'operator-recovered');
  });

  it('is served with a policy that runs only its own script, only to IP addresses, localhost or listed names (no DNS rebinding), and answers an unchanged fleet with 304', async () => {
    const res = await fetch(cp.operatorStatusUrl!);
    expect(res.headers.get('content-security-policy')).toContain("script-src 'self'");
    const port = new URL(cp.operatorStatusUrl!).port;
    expect((await getWithHost(cp.operatorStatusUrl!, `localhost:${port}`)).status).toBe(200);
    for (const path of ['/status', '/status/fleet.json', '/status/fleet.html']) {
      const rebound = await getWithHost(cp.operatorStatusUrl!.replace('/status', path), `attacker.example:${port}`);
      expect(rebound.status, path).toBe(400);
      expect(JSON.parse(rebound.body)).toMatchObject({ error: { type: 'invalid_request' } });
      expect(rebound.body).not.toContain(nodeId);
    }
    // A page whose fleet did not change is told so instead of getting the fragment again.
    const fragment = await fetch(cp.operatorStatusUrl!.replace('/status', '/status/fleet.html'));
    const etag = fragment.headers.get('etag')!;
    expect(await fragment.text()).toContain(instanceId);
    const again = await fetch(cp.operatorStatusUrl!.replace('/status', '/status/fleet.html'), { headers: { 'if-none-match': etag } });
    expect([again.status, await again.text()]).toEqual([304, '']);
    expect(again.headers.get('x-generated-at')).toMatch(/^\d{4}-\d\d-\d\dT/);
    // Scrapers keep working whatever name they use.
    expect((await getWithHost(cp.operatorMetricsUrl!, `metrics.internal:${port}`)).status).toBe(200);
  });
});

describe('the public status page', () => {
  const pages = ['/status', '/status/na', '/status/eu', '/status.json'];

  it('shows the pool degraded while a GPU is out of service, the models and coarse capacity, without a key', async () => {
    // XID 142 (NVENC3 error): NVIDIA says contact support, so the GPU stays out of
    // service until an operator looks at it (remediation drains it and waits).
    node.gpuState.injectXid((gpuIndex + 1) % GPUS, 142);
    const page = await browser.newPage();
    await eventually(async () => {
      await page.goto(`${cp.baseUrl}/status`, { waitUntil: 'load' });
      return (await text(page, 'tr[data-pool="na"] .status')) === 'Degraded';
    }, 20_000, 'pool na degraded on /status');
    expect(await text(page, 'tr[data-pool="eu"] .status')).toBe('Down');
    // One pool in trouble is a degraded service, not a down one.
    expect(await text(page, '.overall .status')).toBe('Degraded');
    await screenshot(page, 'public-index');

    await page.goto(`${cp.baseUrl}/status/na`, { waitUntil: 'load' });
    expect(await text(page, 'h1')).toBe('Service status: pool na');
    expect(await text(page, 'tr[data-model="tiny-chat"]')).toBe('tiny-chat\tOperational\t1 of 1');
    // 4 GPUs: one held by the instance, one out of service: 2 free, fewer than a whole node.
    expect(await text(page, 'tr[data-sku="h100-80gb"] .availability')).toBe('Limited');
    expect(await text(page, '.note')).toBe('part of the GPU capacity is out of service');
    await screenshot(page, 'public-na');
    await page.close();
  });

  it('names no node, address, GPU, org, instance or replica of the fleet', async () => {
    const secrets = [
      nodeId,
      'gpu-node-7',
      gpuUuid,
      ...(await cp.store.nodes.listGpus(nodeId)).map((g) => g.uuid),
      orgId,
      'acme',
      instanceId,
      'onerror',
      ...(await cp.store.replicas.listActive()).flatMap((r) => [r.id, r.endpoint ?? r.id]),
      '127.0.0.1',
    ];
    for (const path of pages) {
      const res = await fetch(cp.baseUrl + path);
      expect(res.status, path).toBe(200);
      const body = await res.text();
      for (const secret of secrets) expect(body, `${path} reveals ${secret}`).not.toContain(secret);
    }
  });

  it('answers any number of requests from one fleet read per cache period', async () => {
    const orgs = cp.store.orgs;
    const list = orgs.list.bind(orgs);
    let reads = 0;
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    orgs.list = async () => {
      reads++;
      await held;
      return list();
    };
    // Counts requests as the server receives them, so the read is released only once all are waiting.
    let received = 0;
    const count = (): void => void received++;
    cp.app.server.on('request', count);
    try {
      // Requests until one finds the cached snapshot expired and starts a read (held open).
      const first: Array<Promise<Response>> = [];
      await eventually(() => {
        first.push(fetch(`${cp.baseUrl}/status.json`));
        return reads > 0;
      }, 5_000, 'a fleet read to start', 20);
      const rest = Array.from({ length: 300 }, (_, i) => fetch(cp.baseUrl + pages[i % pages.length]!));
      await eventually(() => received >= first.length + rest.length, 20_000, 'every request to reach the server');
      release();
      const answers = await Promise.all([...first, ...rest]);
      expect(answers.map((a) => a.status).every((s) => s === 200)).toBe(true);
      // Every answer of the JSON twin sent while the read was held carries the one snapshot.
      const stamps = new Set(await Promise.all(answers.slice(first.length).filter((a) => a.url.endsWith('.json')).map(async (a) => ((await a.json()) as { generated_at: string }).generated_at)));
      expect(stamps.size).toBe(1);
      expect(reads).toBe(1);
    } finally {
      cp.app.server.off('request', count);
      orgs.list = list;
    }
  });

  it('answers 503 in the error envelope while the store does not answer, and recovers with it', async () => {
    const orgs = cp.store.orgs;
    const list = orgs.list.bind(orgs);
    orgs.list = () => Promise.reject(new Error('database is locked'));
    try {
      for (const path of pages) {
        const res = await eventually(async () => {
          const r = await fetch(cp.baseUrl + path);
          return r.status === 503 ? r : undefined;
        }, 5_000, `${path} to answer 503`);
        expect(await res.json()).toEqual({ error: { type: 'service_unavailable', message: 'the service status cannot be read right now; retry shortly' } });
      }
    } finally {
      orgs.list = list;
    }
    await eventually(async () => (await fetch(`${cp.baseUrl}/status/na`)).status === 200, 5_000, 'the page back once the store answers');
  });

  it('is in the OpenAPI document without security, and an unknown pool is a clear 400', async () => {
    const doc = (await (await fetch(`${cp.baseUrl}/openapi.json`)).json()) as { paths: Record<string, Record<string, { operationId: string; security: unknown[]; tags: string[] }>> };
    for (const [path, id] of [['/status', 'getStatusPage'], ['/status/{pool}', 'getPoolStatusPage'], ['/status.json', 'getServiceStatus']] as const) {
      expect(doc.paths[path]?.get).toMatchObject({ operationId: id, security: [], tags: ['status'] });
    }
    const res = await fetch(`${cp.baseUrl}/status/mars`);
    expect(res.status).toBe(400);
    expect(await res.json()).toMatchObject({ error: { type: 'invalid_request', param: 'pool' } });
  });
});
