// Section "Responses API overhead": what POST /v1/responses costs beside POST
// /v1/chat/completions for the same prompt, with the same method as the chat section
// (inference-overhead.ts): a minimal, fast upstream so the control plane is what is
// measured, open-loop latency at a fixed rate (added = through - direct), and the control
// plane's CPU per request at full throughput. A response is translated into a chat
// completion and back, and by default stored (one SQLite insert per request); the
// `store: false` row separates the translation from the storage.
import { fmtInt, fmtMs, median, table } from './format.js';
import { assertAnswers, CHAT_BODY, MODEL, startInferenceStack } from './inference-stack.js';
import { runLoad, type LoadResult } from './load.js';
import { runOpenLoop, type OpenLoopResult } from './open-loop.js';
import type { Section, SectionReport } from './section.js';

const RATE = 1_000;
const RATE_CONNECTIONS = 16;
/** The chat section's targets, applied to the Responses path. */
const TARGET_ADDED_P50_MS = 1;
const TARGET_ADDED_P99_MS = 5;
const ROUNDS = 3;
const LATENCY_SECONDS = 5;
const THROUGHPUT_SECONDS = 4;
const RESPONSES_BODY = JSON.stringify({ model: MODEL, input: 'Say hello.', max_output_tokens: 16 });
const RESPONSES_UNSTORED_BODY = JSON.stringify({ model: MODEL, input: 'Say hello.', max_output_tokens: 16, store: false });

export const inferenceResponsesSection: Section = { title: 'Responses API overhead (fast upstream)', run };

interface Target {
  name: string;
  url: string;
  body: string;
  headers: Record<string, string>;
  /** What a correct answer contains. */
  marker: string;
  cpu: () => number | null;
  latency: OpenLoopResult[];
  throughput: LoadResult[];
}

async function run(): Promise<SectionReport> {
  const stack = await startInferenceStack();
  try {
    const cp = await stack.startControlPlane();
    const base = cp.baseUrl;
    const auth = cp.auth;
    const target = (name: string, url: string, body: string, headers: Record<string, string>, marker: string, cpu: () => number | null): Target => ({
      name, url, body, headers, marker, cpu, latency: [], throughput: [],
    });
    const targets = [
      target('direct to upstream (chat)', stack.directChatUrl, CHAT_BODY, {}, '"choices"', stack.upstream.cpuSeconds),
      target('chat completions', `${base}/chat/completions`, CHAT_BODY, auth, '"choices"', cp.child.cpuSeconds),
      target('responses, store: false', `${base}/responses`, RESPONSES_UNSTORED_BODY, auth, '"output"', cp.child.cpuSeconds),
      target('responses (stored)', `${base}/responses`, RESPONSES_BODY, auth, '"output"', cp.child.cpuSeconds),
    ];
    for (const t of targets) await assertAnswers(t.name, t.url, t.body, t.headers, t.marker);
    const load = (t: Target, seconds: number) =>
      runLoad({ url: t.url, method: 'POST', body: t.body, headers: t.headers, duration: seconds, connections: 32, serverCpuSeconds: t.cpu });
    for (const t of targets) await load(t, 2); // warm-up: JIT, key cache, connection pools
    for (let round = 0; round < ROUNDS; round++) {
      for (const t of targets) {
        t.latency.push(await runOpenLoop({ url: t.url, body: t.body, headers: t.headers, ratePerSecond: RATE, seconds: LATENCY_SECONDS, connections: RATE_CONNECTIONS }));
      }
      for (const t of targets) t.throughput.push(await load(t, THROUGHPUT_SECONDS));
    }
    return report(targets);
  } finally {
    await stack.stop();
  }
}

function report(targets: Target[]): SectionReport {
  const [direct, chat, unstored, stored] = targets as [Target, Target, Target, Target];
  const m = <R>(runs: R[], f: (r: R) => number) => median(runs.map(f));
  const p50 = (t: Target) => m(t.latency, (r) => r.p50Ms);
  const p99 = (t: Target) => m(t.latency, (r) => r.p99Ms);
  const cpuUs = (t: Target) => m(t.throughput, (r) => r.serverUsPerReq ?? Number.NaN);
  const us = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(0)} us`);
  const added50 = p50(stored) - p50(direct);
  const added99 = p99(stored) - p99(direct);
  const pass = added50 < TARGET_ADDED_P50_MS && added99 < TARGET_ADDED_P99_MS;
  return {
    verdict: pass ? 'PASS' : 'MISS',
    summary: `added p50 ${fmtMs(added50)}, p99 ${fmtMs(added99)} at ${fmtInt(RATE)} rps; CPU/req ${us(cpuUs(stored))} vs chat ${us(cpuUs(chat))}`,
    details: [
      `POST /v1/responses beside POST /v1/chat/completions, same prompt, non-streaming. Latency at a fixed ${fmtInt(RATE)} req/s, open loop,`,
      `${ROUNDS} rounds of ${LATENCY_SECONDS} s; throughput with 32 connections, ${ROUNDS} rounds of ${THROUGHPUT_SECONDS} s; medians over rounds.`,
      '',
      ...table(
        ['path', `p50 @${fmtInt(RATE)}/s`, `p99 @${fmtInt(RATE)}/s`, 'added p50', 'added p99', 'max rps', 'server CPU/req'],
        targets.map((t) => [
          t.name,
          fmtMs(p50(t)),
          fmtMs(p99(t)),
          t === direct ? '-' : fmtMs(p50(t) - p50(direct)),
          t === direct ? '-' : fmtMs(p99(t) - p99(direct)),
          fmtInt(m(t.throughput, (r) => r.rps)),
          us(cpuUs(t)),
        ]),
      ),
      '',
      `added p50 ${fmtMs(added50)} (target < ${TARGET_ADDED_P50_MS} ms) ${added50 < TARGET_ADDED_P50_MS ? 'ok' : 'MISSED'}; added p99 ${fmtMs(added99)} (target < ${TARGET_ADDED_P99_MS} ms) ${added99 < TARGET_ADDED_P99_MS ? 'ok' : 'MISSED'} (stored responses, the default)`,
      `translation cost: ${us(cpuUs(unstored) - cpuUs(chat))} CPU/req over chat; storing the response: ${us(cpuUs(stored) - cpuUs(unstored))} more.`,
    ],
  };
}
