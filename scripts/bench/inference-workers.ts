// Section "Chat path on PostgreSQL, by workers": the control plane as it runs past one
// process (SVC_WORKERS on PostgreSQL), in front of the minimal fast upstream, beside a
// bare Node proxy (bare-proxy-server.ts) in the same run:
//   throughput:  requests per second with 32 connections, for 1, 2 (and 4 on a machine
//                with at least 4 cores) workers;
//   CPU/request: CPU of the whole process tree (primary and workers) per request at full
//                throughput; the ratio to the bare proxy is the number the target applies to;
//   latency:     what the control plane adds to a request at concurrency 1 (one
//                connection, closed loop), p50 and p99 over every request;
//   equal load:  CPU/request of both at the same open-loop rate (half what 1 worker
//                sustains). At full throughput the proxy answers several times as many
//                requests per second, and so shares each wake-up and system call among
//                more of them; at an equal rate both pay the same per-request overheads.
import { availableParallelism } from 'node:os';
import { startPostgres } from '../../test/support/postgres.js';
import { fmtInt, fmtMs, median, table } from './format.js';
import { assertAnswers, CHAT_BODY, startInferenceStack } from './inference-stack.js';
import { runLoad, type LoadResult } from './load.js';
import { runOpenLoop } from './open-loop.js';
import type { Section, SectionReport } from './section.js';

const TARGET_CPU_RATIO = 1.5;
const TARGET_ADDED_P99_MS = 1;
const ROUNDS = 2;
const THROUGHPUT_SECONDS = 4;
const SERIAL_SECONDS = 4;
const EQUAL_LOAD_SECONDS = 4;
/** The equal-load rate, as a share of what 1 worker sustains with 32 connections. */
const EQUAL_LOAD_SHARE = 0.5;

export const inferenceWorkersSection: Section = { title: 'Chat path on PostgreSQL by workers (vs a bare Node proxy)', run };

interface Row {
  name: string;
  rps: number;
  cpuUsPerReq: number;
}

interface EqualLoad {
  rate: number;
  bareUsPerReq: number;
  controlPlaneUsPerReq: number;
}

/** CPU per request of the target at a fixed open-loop rate. */
async function cpuAtRate(url: string, headers: Record<string, string>, cpu: () => number | null, rate: number): Promise<number> {
  const before = cpu();
  const run = await runOpenLoop({ url, body: CHAT_BODY, headers, ratePerSecond: rate, seconds: EQUAL_LOAD_SECONDS, connections: 64 });
  const after = cpu();
  return before === null || after === null ? Number.NaN : ((after - before) * 1e6) / run.sent;
}

async function run(): Promise<SectionReport> {
  const workerCounts = availableParallelism() >= 4 ? [1, 2, 4] : [1, 2];
  const pg = await startPostgres();
  const stack = await startInferenceStack();
  try {
    const proxy = await stack.startBareProxy();
    await assertAnswers('bare proxy', proxy.chatUrl, CHAT_BODY, {}, '"choices"');
    const throughput = async (url: string, headers: Record<string, string>, cpu: () => number | null): Promise<LoadResult[]> => {
      await runLoad({ url, method: 'POST', body: CHAT_BODY, headers, duration: 2, connections: 32 }); // warm-up: JIT, key cache, pools
      const runs: LoadResult[] = [];
      for (let i = 0; i < ROUNDS; i++) runs.push(await runLoad({ url, method: 'POST', body: CHAT_BODY, headers, duration: THROUGHPUT_SECONDS, connections: 32, serverCpuSeconds: cpu }));
      return runs;
    };
    const serial = (url: string, headers: Record<string, string>) => runLoad({ url, method: 'POST', body: CHAT_BODY, headers, duration: SERIAL_SECONDS, connections: 1 });
    const summarise = (name: string, runs: LoadResult[]): Row => ({
      name,
      rps: median(runs.map((r) => r.rps)),
      cpuUsPerReq: median(runs.map((r) => r.serverUsPerReq ?? Number.NaN)),
    });

    const rows: Row[] = [summarise('bare Node proxy', await throughput(proxy.chatUrl, {}, proxy.child.cpuSeconds))];
    const directSerial = await serial(stack.directChatUrl, {});
    const proxySerial = await serial(proxy.chatUrl, {});
    let throughSerial: LoadResult | undefined;
    let equal: EqualLoad | undefined;
    for (const workers of workerCounts) {
      // Each count gets a fresh database, so no run reads another's usage rows.
      const cp = await stack.startControlPlane({ databaseUrl: await pg.createDatabase(), workers });
      try {
        const url = `${cp.baseUrl}/chat/completions`;
        await assertAnswers(`${workers} worker(s)`, url, CHAT_BODY, cp.auth, '"choices"');
        rows.push(summarise(`control plane, ${workers} worker${workers === 1 ? '' : 's'}`, await throughput(url, cp.auth, cp.child.cpuSeconds)));
        if (workers === 1) {
          throughSerial = await serial(url, cp.auth);
          const rate = Math.max(100, Math.round((rows.at(-1)!.rps * EQUAL_LOAD_SHARE) / 100) * 100);
          const controlPlaneUsPerReq = await cpuAtRate(url, cp.auth, cp.child.cpuSeconds, rate);
          equal = { rate, controlPlaneUsPerReq, bareUsPerReq: await cpuAtRate(proxy.chatUrl, {}, proxy.child.cpuSeconds, rate) };
        }
      } finally {
        await cp.stop();
      }
    }
    await proxy.stop();
    return report(rows, directSerial, proxySerial, throughSerial!, equal!, workerCounts);
  } finally {
    await stack.stop();
    await pg.stop();
  }
}

function report(rows: Row[], direct: LoadResult, proxy: LoadResult, through: LoadResult, equal: EqualLoad, workerCounts: number[]): SectionReport {
  const bare = rows[0]!;
  const one = rows[1]!;
  const ratio = one.cpuUsPerReq / bare.cpuUsPerReq;
  const addedP50 = through.p50Ms - direct.p50Ms;
  const addedP99 = through.p99Ms - direct.p99Ms;
  const scaling = rows.slice(1).map((r, i) => `${workerCounts[i]}: ${fmtInt(r.rps)}`).join(', ');
  const equalRatio = equal.controlPlaneUsPerReq / equal.bareUsPerReq;
  const cpuOk = ratio <= TARGET_CPU_RATIO;
  const p99Ok = addedP99 < TARGET_ADDED_P99_MS;
  const us = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(0)} us`);
  return {
    verdict: cpuOk && p99Ok ? 'PASS' : 'MISS',
    summary: `CPU/request ${ratio.toFixed(2)}x a bare proxy at full throughput, ${equalRatio.toFixed(2)}x at an equal ${fmtInt(equal.rate)} rps (target <= ${TARGET_CPU_RATIO}x), added p99 at c=1 ${fmtMs(addedP99)} (target < ${TARGET_ADDED_P99_MS} ms); rps by workers ${scaling}`,
    details: [
      `POST /v1/chat/completions (non-streaming) on PostgreSQL; throughput with 32 connections, ${ROUNDS} rounds of ${THROUGHPUT_SECONDS} s after a 2 s warm-up, medians;`,
      `CPU/request is the whole process tree (primary and workers). ${availableParallelism()} cores here, shared with the load generator, the upstream and PostgreSQL.`,
      '',
      ...table(
        ['path', 'rps (32 conns)', 'CPU/request', 'vs bare proxy'],
        rows.map((r) => [r.name, fmtInt(r.rps), us(r.cpuUsPerReq), r === bare ? '1.00x' : `${(r.cpuUsPerReq / bare.cpuUsPerReq).toFixed(2)}x`]),
      ),
      '',
      ...table(
        [`at an equal open-loop load of ${fmtInt(equal.rate)} rps`, 'CPU/request', 'vs bare proxy'],
        [
          ['bare Node proxy', us(equal.bareUsPerReq), '1.00x'],
          ['control plane, 1 worker', us(equal.controlPlaneUsPerReq), `${equalRatio.toFixed(2)}x`],
        ],
      ),
      '',
      ...table(
        ['at concurrency 1', 'p50', 'p99', 'added p50', 'added p99'],
        [
          ['direct to upstream', fmtMs(direct.p50Ms), fmtMs(direct.p99Ms), '-', '-'],
          ['bare Node proxy', fmtMs(proxy.p50Ms), fmtMs(proxy.p99Ms), fmtMs(proxy.p50Ms - direct.p50Ms), fmtMs(proxy.p99Ms - direct.p99Ms)],
          ['control plane, 1 worker', fmtMs(through.p50Ms), fmtMs(through.p99Ms), fmtMs(addedP50), fmtMs(addedP99)],
        ],
      ),
      '',
      `CPU/request ${ratio.toFixed(2)}x the bare proxy at full throughput (target <= ${TARGET_CPU_RATIO}x): ${cpuOk ? 'ok' : 'MISSED'}; ${equalRatio.toFixed(2)}x at an equal load (shown, not judged)`,
      `added p99 at concurrency 1 ${fmtMs(addedP99)} (target < ${TARGET_ADDED_P99_MS} ms): ${p99Ok ? 'ok' : 'MISSED'}`,
      `throughput by workers (${scaling} rps): ${rows.length > 2 && rows[2]!.rps > one.rps ? 'grows' : 'does not grow'} from 1 to 2 workers on this machine.`,
    ],
  };
}
