// Section "Chat path on PostgreSQL, by workers": the control plane as it runs past one
// process (SVC_WORKERS on PostgreSQL), in front of the minimal fast upstream, beside a
// bare Node proxy (bare-proxy-server.ts) in the same run:
//   throughput:  requests per second with 32 connections, for 1, 2 (and 4 on a machine
//                with at least 4 cores) workers;
//   CPU/request: CPU of the whole process tree (primary and workers) per request at full
//                throughput; the ratio to the bare proxy is the number the target applies to;
//   latency:     what the control plane adds to a request at concurrency 1 (one
//                connection, closed loop), p50 and p99 over every request.
import { availableParallelism } from 'node:os';
import { startPostgres } from '../../test/support/postgres.js';
import { fmtInt, fmtMs, median, table } from './format.js';
import { assertAnswers, CHAT_BODY, startInferenceStack } from './inference-stack.js';
import { runLoad, type LoadResult } from './load.js';
import type { Section, SectionReport } from './section.js';

const TARGET_CPU_RATIO = 1.5;
const TARGET_ADDED_P99_MS = 1;
const ROUNDS = 2;
const THROUGHPUT_SECONDS = 4;
const SERIAL_SECONDS = 4;

export const inferenceWorkersSection: Section = { title: 'Chat path on PostgreSQL by workers (vs a bare Node proxy)', run };

interface Row {
  name: string;
  rps: number;
  cpuUsPerReq: number;
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
    await proxy.stop();
    let throughSerial: LoadResult | undefined;
    for (const workers of workerCounts) {
      // Each count gets a fresh database, so no run reads another's usage rows.
      const cp = await stack.startControlPlane({ databaseUrl: await pg.createDatabase(), workers });
      try {
        const url = `${cp.baseUrl}/chat/completions`;
        await assertAnswers(`${workers} worker(s)`, url, CHAT_BODY, cp.auth, '"choices"');
        rows.push(summarise(`control plane, ${workers} worker${workers === 1 ? '' : 's'}`, await throughput(url, cp.auth, cp.child.cpuSeconds)));
        if (workers === 1) throughSerial = await serial(url, cp.auth);
      } finally {
        await cp.stop();
      }
    }
    return report(rows, directSerial, proxySerial, throughSerial!, workerCounts);
  } finally {
    await stack.stop();
    await pg.stop();
  }
}

function report(rows: Row[], direct: LoadResult, proxy: LoadResult, through: LoadResult, workerCounts: number[]): SectionReport {
  const bare = rows[0]!;
  const one = rows[1]!;
  const ratio = one.cpuUsPerReq / bare.cpuUsPerReq;
  const addedP50 = through.p50Ms - direct.p50Ms;
  const addedP99 = through.p99Ms - direct.p99Ms;
  const scaling = rows.slice(1).map((r, i) => `${workerCounts[i]}: ${fmtInt(r.rps)}`).join(', ');
  const cpuOk = ratio <= TARGET_CPU_RATIO;
  const p99Ok = addedP99 < TARGET_ADDED_P99_MS;
  const us = (n: number) => (Number.isNaN(n) ? 'n/a' : `${n.toFixed(0)} us`);
  return {
    verdict: cpuOk && p99Ok ? 'PASS' : 'MISS',
    summary: `CPU/request ${ratio.toFixed(2)}x a bare proxy (target <= ${TARGET_CPU_RATIO}x), added p99 at c=1 ${fmtMs(addedP99)} (target < ${TARGET_ADDED_P99_MS} ms); rps by workers ${scaling}`,
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
        ['at concurrency 1', 'p50', 'p99', 'added p50', 'added p99'],
        [
          ['direct to upstream', fmtMs(direct.p50Ms), fmtMs(direct.p99Ms), '-', '-'],
          ['bare Node proxy', fmtMs(proxy.p50Ms), fmtMs(proxy.p99Ms), fmtMs(proxy.p50Ms - direct.p50Ms), fmtMs(proxy.p99Ms - direct.p99Ms)],
          ['control plane, 1 worker', fmtMs(through.p50Ms), fmtMs(through.p99Ms), fmtMs(addedP50), fmtMs(addedP99)],
        ],
      ),
      '',
      `CPU/request ${ratio.toFixed(2)}x the bare proxy (target <= ${TARGET_CPU_RATIO}x): ${cpuOk ? 'ok' : 'MISSED'}`,
      `added p99 at concurrency 1 ${fmtMs(addedP99)} (target < ${TARGET_ADDED_P99_MS} ms): ${p99Ok ? 'ok' : 'MISSED'}`,
      `throughput by workers (${scaling} rps): ${rows.length > 2 && rows[2]!.rps > one.rps ? 'grows' : 'does not grow'} from 1 to 2 workers on this machine.`,
    ],
  };
}
