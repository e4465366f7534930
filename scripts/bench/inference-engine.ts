// Section "Inference on a CPU-engine replica": a real model-server container (the project's
// CPU engine with tiny-chat int4, from the loopback registry) answered directly and through
// the control plane, side by side: a non-streamed completion's latency, and a streamed
// one's time to first token. Requests alternate direct / through, one at a time, so both
// see the same engine in the same state.
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { CPU_ENGINE_IMAGE } from '../../test/support/images.js';
import { startChild } from './child.js';
import { fmtMs, percentile, table } from './format.js';
import type { InferenceServerInfo } from './inference-server.js';
import type { Section, SectionReport } from './section.js';

const RUNS = 60;
const WARMUP = 10;
const MODEL = 'tiny-chat';
const BODY = { model: MODEL, messages: [{ role: 'user', content: 'abc' }] };
const LABEL = 'svc.bench=inference-engine';

export const inferenceEngineSection: Section = { title: 'Inference on a CPU-engine replica (direct vs through the control plane)', run };

async function run(): Promise<SectionReport> {
  const docker = new Docker();
  const stream = await docker.pull(CPU_ENGINE_IMAGE);
  await new Promise<void>((resolve, reject) => docker.modem.followProgress(stream, (err) => (err ? reject(err) : resolve())));
  const container = await docker.createContainer({
    Image: CPU_ENGINE_IMAGE,
    Cmd: ['--model', '/models/tiny-chat-q4_0.gguf', '--served-model-name', MODEL, '--threads', '1'],
    Labels: { 'svc.bench': 'inference-engine' },
    ExposedPorts: { '8000/tcp': {} },
    HostConfig: { PortBindings: { '8000/tcp': [{ HostIp: '127.0.0.1', HostPort: '' }] }, AutoRemove: true },
  });
  try {
    await container.start();
    const port = (await container.inspect()).NetworkSettings.Ports['8000/tcp']![0]!.HostPort;
    const replica = `http://127.0.0.1:${port}`;
    await waitHealthy(replica);
    const cp = await startChild<InferenceServerInfo>(fileURLToPath(new URL('./inference-server.ts', import.meta.url)), {
      env: { BENCH_REPLICAS: JSON.stringify([{ baseUrl: replica, model: MODEL, quantization: 'int4', image: CPU_ENGINE_IMAGE }]) },
    });
    try {
      const through = { url: `http://127.0.0.1:${cp.info.port}/v1/chat/completions`, headers: { authorization: `Bearer ${cp.info.key}` } };
      const direct = { url: `${replica}/v1/chat/completions`, headers: {} };
      const samples = { directWhole: [] as number[], throughWhole: [] as number[], directFirst: [] as number[], throughFirst: [] as number[] };
      for (let i = 0; i < WARMUP + RUNS; i++) {
        const keep = i >= WARMUP;
        const dw = await whole(direct);
        const tw = await whole(through);
        const df = await firstToken(direct);
        const tf = await firstToken(through);
        if (keep) {
          samples.directWhole.push(dw);
          samples.throughWhole.push(tw);
          samples.directFirst.push(df);
          samples.throughFirst.push(tf);
        }
      }
      return report(samples);
    } finally {
      await cp.stop();
    }
  } finally {
    await container.stop({ t: 1 }).catch(() => undefined);
    for (const c of await docker.listContainers({ all: true, filters: { label: [LABEL] } })) await docker.getContainer(c.Id).remove({ force: true }).catch(() => undefined);
  }
}

async function waitHealthy(baseUrl: string): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const ok = await fetch(`${baseUrl}/health`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false);
    if (ok) return;
    if (Date.now() > deadline) throw new Error(`the CPU engine at ${baseUrl} did not become healthy in 30 s`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

interface Target {
  url: string;
  headers: Record<string, string>;
}

/** Milliseconds until a whole non-streamed completion arrived (checked for the expected text). */
async function whole(target: Target): Promise<number> {
  const started = performance.now();
  const res = await fetch(target.url, { method: 'POST', headers: { 'content-type': 'application/json', ...target.headers }, body: JSON.stringify(BODY) });
  const body = (await res.json()) as { choices?: Array<{ message: { content: string } }> };
  const ms = performance.now() - started;
  if (res.status !== 200 || body.choices?.[0]?.message.content !== 'defghijklmnopqrstuvwxyz') throw new Error(`${target.url} answered ${res.status}: ${JSON.stringify(body).slice(0, 200)}`);
  return ms;
}

/** Milliseconds until the first content token of a streamed completion arrived. */
async function firstToken(target: Target): Promise<number> {
  const started = performance.now();
  const res = await fetch(target.url, { method: 'POST', headers: { 'content-type': 'application/json', ...target.headers }, body: JSON.stringify({ ...BODY, stream: true }) });
  if (res.status !== 200 || !res.body) throw new Error(`${target.url} answered ${res.status} to a stream`);
  const decoder = new TextDecoder();
  let seen = '';
  let first = Number.NaN;
  for await (const bytes of res.body) {
    seen += decoder.decode(bytes, { stream: true });
    if (Number.isNaN(first) && /"content":"[a-z]/.test(seen)) first = performance.now() - started;
  }
  if (Number.isNaN(first) || !seen.includes('[DONE]')) throw new Error(`${target.url} streamed no token: ${seen.slice(0, 200)}`);
  return first;
}

function report(s: { directWhole: number[]; throughWhole: number[]; directFirst: number[]; throughFirst: number[] }): SectionReport {
  const row = (name: string, direct: number[], through: number[]) => [
    name,
    fmtMs(percentile(direct, 50)),
    fmtMs(percentile(through, 50)),
    fmtMs(percentile(through, 50) - percentile(direct, 50)),
    fmtMs(percentile(direct, 95)),
    fmtMs(percentile(through, 95)),
  ];
  const addedWhole = percentile(s.throughWhole, 50) - percentile(s.directWhole, 50);
  const addedFirst = percentile(s.throughFirst, 50) - percentile(s.directFirst, 50);
  return {
    verdict: 'INFO',
    summary: `p50 added by the control plane: ${fmtMs(addedWhole)} on a whole completion, ${fmtMs(addedFirst)} to the first streamed token`,
    details: [
      `tiny-chat int4 on the CPU engine (1 thread), 23-token answers; ${RUNS} requests per kind after ${WARMUP} warm-up rounds, one at a time, alternating direct / through.`,
      '',
      ...table(
        ['measure', 'direct p50', 'through p50', 'added p50', 'direct p95', 'through p95'],
        [row('whole completion', s.directWhole, s.throughWhole), row('time to first token (stream)', s.directFirst, s.throughFirst)],
      ),
    ],
  };
}
