// One autocannon run with the numbers the report needs. Latency percentiles come from
// every response time (autocannon's own histogram rounds to whole milliseconds, too
// coarse for a local server answering in 1-3 ms).
import autocannon, { type Result } from 'autocannon';
import { percentile } from './format.js';

export interface LoadOptions {
  url: string;
  method?: 'GET' | 'POST';
  /** Request body (JSON); sent with content-type application/json. */
  body?: string;
  headers?: Record<string, string>;
  /** Requests per second across all connections; unset means as fast as the server goes. */
  overallRate?: number;
  /** Seconds. */
  duration: number;
  connections: number;
  pipelining?: number;
  /** CPU seconds of the process under test so far, to report how busy it was. */
  serverCpuSeconds?: () => number | null;
}

export interface LoadResult {
  requests: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  /** Share of one core the load generator (this process) used; near 1 means it may be the bottleneck. */
  clientCpu: number;
  /** Share of one core the server used, when known. */
  serverCpu: number | null;
  /**
   * Server CPU microseconds per request, when known. Unlike rps it holds when the server
   * did not get a whole core (other processes on the host), so it cross-checks rps.
   */
  serverUsPerReq: number | null;
  raw: Result;
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const times: number[] = [];
  const cpuBefore = process.cpuUsage();
  const serverBefore = options.serverCpuSeconds?.() ?? null;
  const started = performance.now();

  const raw = await new Promise<Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.url,
        method: options.method ?? 'GET',
        ...(options.body === undefined ? {} : { body: options.body }),
        ...(options.overallRate === undefined ? {} : { overallRate: options.overallRate }),
        headers: { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
        duration: options.duration,
        connections: options.connections,
        pipelining: options.pipelining ?? 1,
        timeout: 10,
      },
      (err, result) => (err ? reject(err) : resolve(result)),
    );
    instance.on('response', (_client, _status, _bytes, responseTime) => {
      times.push(responseTime);
    });
  });

  const wallSeconds = (performance.now() - started) / 1000;
  const cpu = process.cpuUsage(cpuBefore);
  const serverAfter = options.serverCpuSeconds?.() ?? null;
  assertClean(raw);
  return {
    requests: raw.requests.total,
    rps: raw.requests.total / raw.duration,
    p50Ms: percentile(times, 50),
    p99Ms: percentile(times, 99),
    clientCpu: (cpu.user + cpu.system) / 1e6 / wallSeconds,
    serverCpu: serverBefore !== null && serverAfter !== null ? (serverAfter - serverBefore) / wallSeconds : null,
    serverUsPerReq:
      serverBefore !== null && serverAfter !== null ? ((serverAfter - serverBefore) * 1e6) / raw.requests.total : null,
    raw,
  };
}

/** A run that saw errors or anything but 2xx measured something else: refuse it. */
function assertClean(result: Result): void {
  const problems: string[] = [];
  if (result.non2xx > 0) {
    const codes = Object.entries(result.statusCodeStats)
      .map(([code, { count }]) => `${code}: ${count}`)
      .join(', ');
    problems.push(`${result.non2xx} non-2xx responses (${codes})`);
  }
  if (result.errors > 0) problems.push(`${result.errors} errors`);
  if (result.timeouts > 0) problems.push(`${result.timeouts} timeouts`);
  if (result.requests.total === 0) problems.push('no responses at all');
  if (problems.length > 0) throw new Error(`load run against ${result.url} is invalid: ${problems.join('; ')}`);
}
