// Section "Inference gateway overhead": what the control plane adds to a chat completion
// when the replica is never the bottleneck (a minimal, fast OpenAI-compatible upstream,
// as gateway benchmarks do). The same request goes straight to the upstream ("direct")
// or through the control plane's whole path ("through": auth pipeline, validation,
// routing, the replica call, the rewritten answer, the usage record), alternating round
// by round so drift hits both alike.
//   latency:    a fixed 1,000 requests per second, evenly spaced and open-loop (each
//               latency counts from when the request was due); added = through - direct.
//   throughput: as fast as each goes with 32 connections; ratio = through / direct.
import { fmtInt, fmtMs, fmtPct, median, table } from './format.js';
import { assertAnswers, CHAT_BODY as BODY, startInferenceStack } from './inference-stack.js';
import { runLoad, type LoadResult } from './load.js';
import { runOpenLoop, type OpenLoopResult } from './open-loop.js';
import type { Section, SectionReport } from './section.js';

const RATE = 1_000;
/** Connections the fixed-rate load shares: more than 1,000/s ever keeps busy at once. */
const RATE_CONNECTIONS = 16;
const TARGET_ADDED_P50_MS = 1;
const TARGET_ADDED_P99_MS = 5;
const TARGET_RATIO = 0.7;
const ROUNDS = 3;
const LATENCY_SECONDS = 5;
const THROUGHPUT_SECONDS = 4;

export const inferenceOverheadSection: Section = { title: 'Inference gateway overhead (fast upstream)', run };

interface Target {
  name: string;
  url: string;
  headers: Record<string, string>;
  latency: OpenLoopResult[];
  throughput: LoadResult[];
}

async function run(): Promise<SectionReport> {
  const stack = await startInferenceStack();
  try {
    const cp = await stack.startControlPlane();
    const proxy = await stack.startBareProxy();
    const direct: Target = { name: 'direct to upstream', url: stack.directChatUrl, headers: {}, latency: [], throughput: [] };
    const through: Target = { name: 'through control plane', url: `${cp.baseUrl}/chat/completions`, headers: cp.auth, latency: [], throughput: [] };
    const bare: Target = { name: 'bare Node proxy (reference)', url: proxy.chatUrl, headers: {}, latency: [], throughput: [] };
    for (const t of [direct, through, bare]) await assertAnswers(t.name, t.url, BODY, t.headers, '"choices"');
    const load = (t: Target, seconds: number) =>
      runLoad({
        url: t.url,
        method: 'POST',
        body: BODY,
        headers: t.headers,
        duration: seconds,
        connections: 32,
        serverCpuSeconds: t === through ? cp.child.cpuSeconds : t === bare ? proxy.child.cpuSeconds : stack.upstream.cpuSeconds,
      });
    for (const t of [direct, through, bare]) await load(t, 2); // warm-up: JIT, key cache, connection pools
    const fixedRate = (t: Target) => runOpenLoop({ url: t.url, body: BODY, headers: t.headers, ratePerSecond: RATE, seconds: LATENCY_SECONDS, connections: RATE_CONNECTIONS });
    for (let round = 0; round < ROUNDS; round++) {
      for (const t of [direct, through]) t.latency.push(await fixedRate(t));
      for (const t of [direct, through, bare]) t.throughput.push(await load(t, THROUGHPUT_SECONDS));
    }
    return report(direct, through, bare);
  } finally {
    await stack.stop();
  }
}

function report(direct: Target, through: Target, bare: Target): SectionReport {
  const m = <R>(runs: R[], f: (r: R) => number) => median(runs.map(f));
  const summary = (x: Target) => ({
    p50: m(x.latency, (r) => r.p50Ms),
    p99: m(x.latency, (r) => r.p99Ms),
    rate: m(x.latency, (r) => r.achievedRate),
    rps: m(x.throughput, (r) => r.rps),
  });
  const d = summary(direct);
  const t = summary(through);
  const b = { rps: median(bare.throughput.map((r) => r.rps)) };
  const cpuUs = (x: Target) => m(x.throughput, (r) => r.serverUsPerReq ?? Number.NaN);
  const addedP50 = t.p50 - d.p50;
  const addedP99 = t.p99 - d.p99;
  const ratio = t.rps / d.rps;
  const checks = [
    `added p50 ${fmtMs(addedP50)} (target < ${TARGET_ADDED_P50_MS} ms) ${addedP50 < TARGET_ADDED_P50_MS ? 'ok' : 'MISSED'}`,
    `added p99 ${fmtMs(addedP99)} (target < ${TARGET_ADDED_P99_MS} ms) ${addedP99 < TARGET_ADDED_P99_MS ? 'ok' : 'MISSED'}`,
    `throughput ratio ${ratio.toFixed(2)} (target >= ${TARGET_RATIO}) ${ratio >= TARGET_RATIO ? 'ok' : 'MISSED'}`,
  ];
  const pass = addedP50 < TARGET_ADDED_P50_MS && addedP99 < TARGET_ADDED_P99_MS && ratio >= TARGET_RATIO;
  const us = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(0)} us`);
  return {
    verdict: pass ? 'PASS' : 'MISS',
    summary: `added p50 ${fmtMs(addedP50)}, p99 ${fmtMs(addedP99)} at ${fmtInt(RATE)} rps; throughput ${fmtPct(ratio)} of direct`,
    details: [
      `POST /v1/chat/completions (non-streaming, ${BODY.length}-byte body). Latency at a fixed ${fmtInt(RATE)} req/s, evenly spaced, open loop, ${ROUNDS} rounds of ${LATENCY_SECONDS} s;`,
      `throughput with 32 connections, ${ROUNDS} rounds of ${THROUGHPUT_SECONDS} s; medians over rounds. Each side of the comparison is its own process.`,
      '',
      ...table(
        ['path', `p50 @${fmtInt(RATE)}/s`, `p99 @${fmtInt(RATE)}/s`, 'achieved rate', 'max rps', 'server CPU/req'],
        [
          [direct.name, fmtMs(d.p50), fmtMs(d.p99), fmtInt(d.rate), fmtInt(d.rps), us(cpuUs(direct))],
          [through.name, fmtMs(t.p50), fmtMs(t.p99), fmtInt(t.rate), fmtInt(t.rps), us(cpuUs(through))],
          [bare.name, '-', '-', '-', fmtInt(b.rps), us(cpuUs(bare))],
        ],
      ),
      '',
      ...checks,
      'server CPU/req is the process that answered: the upstream for "direct", the control plane for "through", the proxy for the reference.',
      `reference: a bare Node proxy (no auth, validation, routing or records) reaches ${fmtPct(b.rps / d.rps)} of direct; the control plane reaches ${fmtPct(t.rps / b.rps)} of the bare proxy.`,
    ],
  };
}
