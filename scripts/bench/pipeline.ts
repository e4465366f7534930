// Section "API pipeline overhead": how much throughput the /v1 request pipeline (request
// id, API-key auth, IP allowlist, public-key rules, scope, rate limit, idempotency) costs
// on the cheapest real route. Three variants of the same response on one server:
//   bare     a plain handler returning the model list (no pipeline, no schemas);
//   route    the real /v1/models route code without the pipeline (adds its schemas);
//   pipeline authenticated GET /v1/models (everything).
// The target compares pipeline with bare; "route" splits that cost into the route's own
// schema work and the pipeline hooks. Variants alternate round by round so drift
// (noisy neighbours, JIT, GC) hits all alike.
import { fileURLToPath } from 'node:url';
import { startChild } from './child.js';
import { fmtInt, fmtMs, fmtPct, median, table } from './format.js';
import { runLoad, type LoadResult } from './load.js';
import type { PipelineServerInfo } from './pipeline-server.js';
import type { Section, SectionReport } from './section.js';

const TARGET_COST = 0.2; // the pipeline may cost under 20% of bare throughput
const CONNECTIONS = 32;
const WARMUP_SECONDS = 2;
const ROUND_SECONDS = 4;
const ROUNDS = 3;

interface Variant {
  name: string;
  path: string;
  headers: Record<string, string>;
  runs: LoadResult[];
}

export const pipelineSection: Section = {
  title: 'API pipeline overhead',
  run,
};

async function run(): Promise<SectionReport> {
  const script = fileURLToPath(new URL('./pipeline-server.ts', import.meta.url));
  // BENCH_CPU_PROF=<dir> profiles the server; open the .cpuprofile in Chrome DevTools.
  const profileDir = process.env.BENCH_CPU_PROF;
  const server = await startChild<PipelineServerInfo>(script, {
    nodeArgs: profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`] : [],
  });
  try {
    const base = `http://127.0.0.1:${server.info.port}`;
    const bare: Variant = { name: 'bare handler', path: '/bench/models-bare', headers: {}, runs: [] };
    const route: Variant = { name: 'route, no pipeline', path: '/bench/route/models', headers: {}, runs: [] };
    const piped: Variant = {
      name: 'GET /v1/models',
      path: '/v1/models',
      headers: { authorization: `Bearer ${server.info.key}` },
      runs: [],
    };
    const variants = [bare, route, piped];
    const bodyBytes = await assertSameResponses(base, variants);

    const load = (v: Variant, duration: number): Promise<LoadResult> =>
      runLoad({
        url: base + v.path,
        headers: v.headers,
        duration,
        connections: CONNECTIONS,
        serverCpuSeconds: server.cpuSeconds,
      });

    // Warm-up: JIT, the key cache, fastify's serializers; results thrown away.
    for (const v of variants) await load(v, WARMUP_SECONDS);
    for (let round = 0; round < ROUNDS; round++) {
      for (const v of variants) v.runs.push(await load(v, ROUND_SECONDS));
    }
    return report(bare, route, piped, bodyBytes, profileDir);
  } finally {
    await server.stop();
  }
}

/** Every variant must answer 200 with a body of the same size, or the comparison means nothing. */
async function assertSameResponses(base: string, variants: Variant[]): Promise<number> {
  const answers = await Promise.all(
    variants.map(async (v) => {
      const res = await fetch(base + v.path, { headers: v.headers });
      return { v, status: res.status, body: await res.text() };
    }),
  );
  for (const a of answers) {
    if (a.status !== 200) throw new Error(`${a.v.name} (${a.v.path}) answered ${a.status}, not 200: ${a.body.slice(0, 300)}`);
  }
  const sizes = answers.map((a) => Buffer.byteLength(a.body));
  if (new Set(sizes).size !== 1) {
    throw new Error(`bodies differ in size: ${answers.map((a, i) => `${a.v.name} ${sizes[i]} B`).join(', ')}`);
  }
  return sizes[0]!;
}

interface Summary {
  rps: number;
  p50: number;
  p99: number;
  serverCpu: number;
  clientCpu: number;
  /** Server CPU per request; NaN off Linux. */
  cpuUs: number;
  /** The least server CPU share of any round: below ~85% the server was not saturated. */
  minServerCpu: number;
}

function summarize(v: Variant): Summary {
  return {
    rps: median(v.runs.map((r) => r.rps)),
    p50: median(v.runs.map((r) => r.p50Ms)),
    p99: median(v.runs.map((r) => r.p99Ms)),
    serverCpu: median(v.runs.map((r) => r.serverCpu ?? Number.NaN)),
    clientCpu: median(v.runs.map((r) => r.clientCpu)),
    cpuUs: median(v.runs.map((r) => r.serverUsPerReq ?? Number.NaN)),
    minServerCpu: Math.min(...v.runs.map((r) => r.serverCpu ?? Number.NaN)),
  };
}

function report(bare: Variant, route: Variant, piped: Variant, bodyBytes: number, profileDir: string | undefined): SectionReport {
  const b = summarize(bare);
  const r = summarize(route);
  const p = summarize(piped);
  const ratio = p.rps / b.rps;
  const rpsCost = 1 - ratio;
  const cpuCost = 1 - b.cpuUs / p.cpuUs; // NaN where /proc is missing
  // rps measures the server's cost only while the server has a whole core to itself. If
  // it did not in some round (other load on the host), judge by CPU per request instead.
  const starved = [b, r, p].some((s) => s.minServerCpu < 0.85);
  const byCpu = starved && !Number.isNaN(cpuCost);
  const cost = byCpu ? cpuCost : rpsCost;
  const verdict = cost < TARGET_COST ? 'PASS' : 'MISS';
  const cpu = (n: number): string => (Number.isNaN(n) ? 'n/a' : fmtPct(n));
  const us = (n: number): string => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(1)} us`);
  const row = (v: Variant, s: Summary): string[] => [
    v.name,
    fmtInt(s.rps),
    fmtMs(s.p50),
    fmtMs(s.p99),
    us(s.cpuUs),
    cpu(s.serverCpu),
    cpu(s.clientCpu),
  ];

  const details = [
    `${CONNECTIONS} connections, pipelining 1; ${ROUNDS} alternating rounds of ${ROUND_SECONDS} s after a ${WARMUP_SECONDS} s warm-up per variant.`,
    `Every variant answers 200 with the same ${bodyBytes}-byte body; a run with any non-2xx, error or timeout aborts the section.`,
    'Medians over rounds:',
    '',
    ...table(
      ['variant', 'rps', 'p50', 'p99', 'server CPU/req', 'server CPU', 'loadgen CPU'],
      [row(bare, b), row(route, r), row(piped, p)],
    ),
    '',
    'Per round rps (bare / route / pipeline):',
    ...bare.runs.map(
      (run, i) => `  round ${i + 1}: ${fmtInt(run.rps)} / ${fmtInt(route.runs[i]!.rps)} / ${fmtInt(piped.runs[i]!.rps)}`,
    ),
    '',
    `throughput ratio pipeline/bare = ${ratio.toFixed(3)}`,
    `pipeline cost = 1 - ratio = ${fmtPct(rpsCost)} (target: under ${fmtPct(TARGET_COST)})${byCpu ? '' : ` -> ${verdict}`}`,
    `  of which the route's own schemas (querystring validation, response serialization): ${fmtPct(1 - r.rps / b.rps)}`,
    `  of which the /v1 pipeline hooks: ${fmtPct((r.rps - p.rps) / b.rps)}`,
    `cross-check by server CPU per request: cost = 1 - bare/pipeline = ${
      Number.isNaN(cpuCost) ? 'n/a' : fmtPct(cpuCost)
    } (route schemas ${us(r.cpuUs - b.cpuUs)}, pipeline hooks ${us(p.cpuUs - r.cpuUs)} per request)${byCpu ? ` -> ${verdict}` : ''}`,
  ];
  if (starved) {
    details.push(
      'warning: in some round the server used <85% of a core (other load on the host?), so rps is noisy;',
      `         the verdict ${byCpu ? 'uses the CPU cross-check' : 'still uses rps (no CPU numbers on this OS)'}.`,
    );
  }
  // A saturated load generator caps every variant alike and hides the pipeline's cost.
  if (b.clientCpu > 0.9) details.push('warning: the load generator used >90% of a core; bare rps may be client-bound.');
  if (profileDir) details.push(`server CPU profile written to ${profileDir}`);
  const basis = byCpu ? ' by server CPU per request' : '';
  return { summary: `pipeline cost ${fmtPct(cost)}${basis} (target < ${fmtPct(TARGET_COST)})`, verdict, details };
}
