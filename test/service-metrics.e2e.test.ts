// The service's own metrics and the fleet alert rules, end to end, on one stack: a real
// control plane, a real agent process running one CPU-engine replica in Docker, a webhook
// receiver that refuses. Real traffic moves the inference series (checked against the
// usage the API answered); `promtool check metrics` lints the exposition; then each fault
// is scripted (the receiver refuses, the engine's container is killed, the agent comes back
// with a disk pressure threshold of 1%, the agent process is killed) and the scrapes taken before and during it are replayed with
// `promtool test rules` against control-plane/alerts/fleet-alerts.yml: each rule stays
// quiet on the healthy scrape and fires on its fault.
import { spawnSync } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { eventually } from './support/node-agent-process.js';
import { startReplicaStack, type ReplicaStack } from './support/replica-stack.js';

const docker = new Docker();
const dir = mkdtempSync(join(tmpdir(), 'service-metrics-'));
const ALERTS = new URL('../control-plane/alerts/fleet-alerts.yml', import.meta.url).pathname;
const CHAT = { model: 'tiny-chat', quantization: 'int4', pool: 'na' } as const;
let stack: ReplicaStack;
let receiver: Server;
let refused = 0;
let liveKey: string;
let adminKey: string;

interface Sample {
  series: string;
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** The exposition's samples (our label values hold no escaped quotes). */
function parse(text: string): Sample[] {
  return text
    .split('\n')
    .filter((l) => l !== '' && !l.startsWith('#'))
    .map((line) => {
      const m = /^([a-zA-Z_:][\w:]*)(\{.*\})? (\S+)$/.exec(line);
      if (!m) throw new Error(`unparsed exposition line: ${line}`);
      const labels = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((l) => [l[1]!, l[2]!]));
      return { series: `${m[1]}${m[2] ?? ''}`, name: m[1]!, labels, value: Number(m[3]) };
    });
}

async function scrapeText(): Promise<string> {
  const res = await fetch(`${stack.cp.baseUrl}/metrics`);
  expect(res.status).toBe(200);
  expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return res.text();
}
const scrape = async () => parse(await scrapeText());

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

beforeAll(async () => {
  receiver = createServer((_req, res) => {
    refused++;
    res.writeHead(503).end('down for maintenance');
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  stack = await startReplicaStack({
    name: 'service-metrics',
    replicas: 'tiny-chat:int4:na=1',
    ready: 1,
    enrollTimeoutMs: 90_000,
    readyTimeoutMs: 120_000,
    // The agent is declared lost 5 s after its last message (killed on purpose below).
    config: { nodeDeadlineMs: 5_000, webhookAllowedTargets: ['127.0.0.1'], webhookPollMs: 100 },
  });
  const { keys } = stack.cp.app.services;
  liveKey = (await keys.create({ orgId: stack.orgId, scopes: ['inference:write'] })).value;
  adminKey = (await keys.create({ orgId: stack.orgId, admin: true })).value;
}, 240_000);

afterAll(async () => {
  await stack?.close();
  await new Promise<void>((resolve) => (receiver ? receiver.close(() => resolve()) : resolve()));
  rmSync(dir, { recursive: true, force: true });
});

describe('service metrics on /metrics', () => {
  it('inference requests, tokens in and out, latency and time to first token move with real traffic, by model, quantization and pool', async () => {
    const before = await scrape();
    const client = new OpenAI({ apiKey: liveKey, baseURL: `${stack.cp.baseUrl}/v1` });
    const whole = await client.chat.completions.create({ model: 'tiny-chat', messages: [{ role: 'user', content: 'a b c' }], max_tokens: 5 });
    const stream = await client.chat.completions.create({
      model: 'tiny-chat',
      messages: [{ role: 'user', content: 'd e f' }],
      max_tokens: 5,
      stream: true,
      stream_options: { include_usage: true },
    });
    let streamed = { prompt_tokens: 0, completion_tokens: 0 };
    for await (const chunk of stream) if (chunk.usage) streamed = chunk.usage;
    const refusedModel = await fetch(`${stack.cp.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${liveKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'x' }], max_tokens: -1 }),
    });
    expect(refusedModel.status).toBe(400);

    const after = await scrape();
    const moved = (name: string, labels: Record<string, string>) => (value(after, name, labels) ?? 0) - (value(before, name, labels) ?? 0);
    const ok = { endpoint: '/v1/chat/completions', ...CHAT, status: '200' };
    expect(moved('svc_inference_requests_total', ok)).toBe(2);
    // A refused request never reached a replica: its quantization and pool are "none".
    expect(moved('svc_inference_requests_total', { endpoint: '/v1/chat/completions', model: 'tiny-chat', quantization: 'none', pool: 'none', status: '400' })).toBe(1);
    expect(moved('svc_inference_input_tokens_total', CHAT)).toBe(whole.usage!.prompt_tokens + streamed.prompt_tokens);
    expect(moved('svc_inference_output_tokens_total', CHAT)).toBe(whole.usage!.completion_tokens + streamed.completion_tokens);
    expect(moved('svc_inference_output_tokens_total', CHAT)).toBeGreaterThan(0);
    expect(moved('svc_inference_request_duration_seconds_count', { endpoint: '/v1/chat/completions', ...CHAT })).toBe(2);
    expect(moved('svc_inference_time_to_first_token_seconds_count', CHAT)).toBe(1);
    expect(moved('svc_inference_time_to_first_token_seconds_sum', CHAT)).toBeGreaterThan(0);
    // The first token cannot come after the last byte.
    expect(moved('svc_inference_time_to_first_token_seconds_sum', CHAT)).toBeLessThanOrEqual(moved('svc_inference_request_duration_seconds_sum', { endpoint: '/v1/chat/completions', ...CHAT }));
  });

  it('a client that leaves mid-stream is still counted, and leaves no bookkeeping behind', async () => {
    const requests = (samples: Sample[]) =>
      samples.filter((x) => x.name === 'svc_inference_requests_total' && x.labels.model === 'tiny-chat' && x.labels.status === '200').reduce((a, x) => a + x.value, 0);
    const before = requests(await scrape());
    const leave = new AbortController();
    const res = await fetch(`${stack.cp.baseUrl}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${liveKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tiny-chat', messages: [{ role: 'user', content: 'a' }], max_tokens: 200, stream: true }),
      signal: leave.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    leave.abort();
    await eventually(async () => (requests(await scrape()) === before + 1 ? true : undefined), 10_000, 'the cut stream counted');
    expect(stack.cp.app.serviceMetrics.inference.open).toBe(0);
  });

  it('a tenant cannot add series: made-up model names, pools and quantizations are counted as unknown/none', async () => {
    for (let i = 0; i < 25; i++) {
      await fetch(`${stack.cp.baseUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { authorization: `Bearer ${liveKey}`, 'content-type': 'application/json', 'x-service-pool': `pool-${i}` },
        body: JSON.stringify({ model: `attacker-model-${i}`, quantization: `q${i}`, messages: [{ role: 'user', content: 'x' }] }),
      });
    }
    const text = await scrapeText();
    expect(text).not.toMatch(/attacker-model|pool-\d|"q\d+"/);
    const models = new Set(parse(text).filter((s) => s.name === 'svc_inference_requests_total').map((s) => s.labels.model));
    expect([...models].sort()).toEqual(['tiny-chat', 'unknown']);
    // No organization, key or request identity in any series.
    expect(text).not.toContain(stack.orgId);
    expect(text).not.toMatch(/key_|req_|org_/);
  });

  it('replicas against desired, nodes, connected agents and instances by status are exported', async () => {
    const now = await scrape();
    expect(value(now, 'svc_replicas_desired', CHAT)).toBe(1);
    expect(value(now, 'svc_replicas', { ...CHAT, state: 'running' })).toBe(1);
    expect(value(now, 'svc_replicas', { ...CHAT, state: 'restarting' })).toBe(0);
    expect(value(now, 'svc_nodes', { pool: 'na', status: 'ready' })).toBe(1);
    expect(value(now, 'svc_nodes', { pool: 'na', status: 'unreachable' })).toBe(0);
    expect(value(now, 'svc_agents_connected')).toBe(1);
    for (const status of ['provisioning', 'starting', 'ready', 'draining']) expect(value(now, 'svc_instances', { pool: 'na', status })).toBe(0);
  });

  it('promtool check metrics has nothing to say about the exposition', () => {
    return scrapeText().then((text) => {
      const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 60_000 });
      expect(lint.error, 'promtool is installed by scripts/setup-host.sh (Debian package prometheus)').toBeUndefined();
      expect(`${lint.stdout}${lint.stderr}`).toBe('');
      expect(lint.status).toBe(0);
    });
  });
});

describe('fleet alert rules fire on their scripted faults (promtool test rules over scraped series)', () => {
  let healthy: Sample[];
  const faults: Record<string, Sample[]> = {};

  it('promtool check rules accepts the shipped fleet rules', () => {
    const check = spawnSync('promtool', ['check', 'rules', ALERTS], { encoding: 'utf8', timeout: 60_000 });
    expect(check.status, check.stdout + check.stderr).toBe(0);
    expect(check.stdout).toContain('SUCCESS: 5 rules found');
  });

  it('scrapes the healthy stack, then each fault: a refusing webhook receiver, a dead engine, a full disk, a killed agent', async () => {
    healthy = await scrape();
    expect(value(healthy, 'svc_webhook_deliveries_pending')).toBe(0);

    // A webhook receiver that refuses: revoking a key emits key.revoked to it.
    const created = await fetch(`${stack.cp.baseUrl}/v1/webhooks`, {
      method: 'POST',
      headers: { authorization: `Bearer ${adminKey}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`, event_types: ['key.revoked'] }),
    });
    expect(created.status, await created.clone().text()).toBe(201);
    const doomed = await stack.cp.app.services.keys.create({ orgId: stack.orgId, scopes: ['inference:read'] });
    const revoked = await fetch(`${stack.cp.baseUrl}/v1/admin/keys/${doomed.record.id}/revoke`, { method: 'POST', headers: { authorization: `Bearer ${adminKey}` } });
    expect(revoked.status).toBe(200);
    faults.webhook = await eventually(async () => {
      const s = await scrape();
      return value(s, 'svc_webhook_deliveries_pending') === 1 && value(s, 'svc_webhook_delivery_attempts_total', { outcome: 'failed_will_retry' }) === 1 ? s : undefined;
    }, 20_000, 'one delivery pending after a refused attempt');
    expect(refused).toBeGreaterThanOrEqual(1);

    // The engine dies: its container is killed; the agent restarts it after a backoff.
    const replica = await eventually(
      async () => (await stack.cp.app.services.replicas.list({ includeEnded: false, limit: 10 })).find((r) => r.model === CHAT.model && r.status === 'running'),
      30_000,
      'the running replica',
    );
    const container = await eventually(async () => (await docker.listContainers({ filters: { label: [`svc.replica=${replica.id}`] } }))[0], 10_000, "the replica's container");
    await docker.getContainer(container.Id).kill();
    faults.replica = await eventually(async () => {
      const s = await scrape();
      return value(s, 'svc_replicas', { ...CHAT, state: 'running' }) === 0 ? s : undefined;
    }, 20_000, 'the replica not running');

    // The disk fills: this host's disk is "nearly full" for an agent whose threshold is 1%.
    expect(value(healthy, 'svc_nodes_disk_pressure', { pool: 'na' })).toBe(0);
    await stack.restartAgent({ SVC_DISK_PRESSURE_PERCENT: '1' });
    faults.disk = await eventually(async () => {
      const s = await scrape();
      return value(s, 'svc_nodes_disk_pressure', { pool: 'na' }) === 1 ? s : undefined;
    }, 20_000, 'the node under disk pressure');

    // The agent process is killed: the node goes unreachable after the deadline.
    stack.agent.child.kill('SIGKILL');
    faults.node = await eventually(async () => {
      const s = await scrape();
      return value(s, 'svc_nodes', { pool: 'na', status: 'unreachable' }) === 1 ? s : undefined;
    }, 30_000, 'the node unreachable');
    expect(value(faults.node, 'svc_agents_connected')).toBe(0);
  }, 120_000);

  it('each rule is quiet on the healthy scrape and fires on its fault', () => {
    expect(Object.keys(faults).sort(), 'the fault scrapes (previous test)').toEqual(['disk', 'node', 'replica', 'webhook']);
    const INTERVAL_S = 15;
    const HEALTHY_STEPS = 20; // 5 minutes of the healthy scrape,
    const FAULT_STEPS = 100; // then 25 minutes of the fault's scrape.
    /** The healthy then the fault value of every series of `names` in either scrape. */
    const inputSeries = (fault: Sample[], names: string[]) => {
      const all = new Set([...healthy, ...fault].filter((s) => names.includes(s.name)).map((s) => s.series));
      return [...all].map((series) => {
        const at = (samples: Sample[]) => samples.find((s) => s.series === series)?.value ?? 'stale';
        const h = at(healthy);
        const f = at(fault);
        return { series, values: `${h === 'stale' ? '_' : h}x${HEALTHY_STEPS - 1} ${f === 'stale' ? '_' : f}x${FAULT_STEPS}` };
      });
    };
    const quiet = `${(HEALTHY_STEPS - 2) * INTERVAL_S}s`;
    const firing = `${(HEALTHY_STEPS + FAULT_STEPS - 1) * INTERVAL_S}s`;
    const testCase = (fault: Sample[], names: string[], alertname: string, expected: Array<{ exp_labels: Record<string, string>; exp_annotations: Record<string, string> }>) => ({
      interval: `${INTERVAL_S}s`,
      input_series: inputSeries(fault, names),
      alert_rule_test: [
        { eval_time: quiet, alertname, exp_alerts: [] },
        { eval_time: firing, alertname, exp_alerts: expected },
      ],
    });
    const tests = {
      rule_files: [ALERTS],
      evaluation_interval: `${INTERVAL_S}s`,
      tests: [
        testCase(faults.webhook!, ['svc_webhook_deliveries_pending', 'svc_webhook_delivery_attempts_total'], 'WebhookBacklog', [
          {
            exp_labels: { severity: 'warning' },
            exp_annotations: {
              summary: 'Webhook deliveries pending for 15 minutes with no delivery succeeding',
              description: '1 deliveries wait; every endpoint refuses or the delivery worker is stuck. One customer\'s broken endpoint alone does not fire this while others receive.',
            },
          },
        ]),
        testCase(faults.replica!, ['svc_replicas', 'svc_replicas_desired'], 'ReplicaDown', [
          {
            exp_labels: { severity: 'warning', ...CHAT },
            exp_annotations: {
              summary: 'tiny-chat (int4) in pool na: 1 desired replica(s) not running',
              description: "Replicas are restarting, unhealthy or cannot be placed; `svcctl replicas list` shows each one's status and the agent's message.",
            },
          },
        ]),
        testCase(faults.replica!, ['svc_replicas', 'svc_replicas_desired'], 'PoolDegraded', [
          {
            exp_labels: { severity: 'critical', pool: 'na' },
            exp_annotations: {
              summary: 'Pool na serves less than half of its desired replicas',
              description: 'Inference in the pool is failing over or refused (no capacity); look at NodeUnreachable and ReplicaDown for the cause.',
            },
          },
        ]),
        testCase(faults.disk!, ['svc_nodes_disk_pressure'], 'NodeDiskPressure', [
          {
            exp_labels: { severity: 'warning', pool: 'na' },
            exp_annotations: {
              summary: '1 node(s) in pool na under disk pressure',
              description:
                "The disk holding Docker's data is nearly full (bytes or inodes past SVC_DISK_PRESSURE_PERCENT); they take no new instances or replicas, what runs keeps running. `svcctl nodes list` shows them as ready,disk-pressure; free space there (stopped containers, images, the provider's own files).",
            },
          },
        ]),
        testCase(faults.node!, ['svc_nodes'], 'NodeUnreachable', [
          {
            exp_labels: { severity: 'critical', pool: 'na', status: 'unreachable' },
            exp_annotations: {
              summary: '1 node(s) in pool na unreachable',
              description: 'Their agents stopped reporting (process down, host down or network cut); their replicas are re-placed and their instances keep running unsupervised. `svcctl nodes list` names them.',
            },
          },
        ]),
      ],
    };
    const file = join(dir, 'fleet-alerts.scraped.test.json');
    // promtool reads YAML, of which JSON is a subset.
    writeFileSync(file, JSON.stringify(tests, null, 2));
    const run = spawnSync('promtool', ['test', 'rules', file], { encoding: 'utf8', timeout: 60_000 });
    expect(run.status, `${run.stdout}${run.stderr}\n(input: ${file})`).toBe(0);
  });
});
