// The setup every inference bench section shares: the minimal fast upstream (so the
// control plane is what is measured), the control plane whose replica directory holds
// it (inference-server.ts, on SQLite, or on PostgreSQL with n workers), optionally the
// bare Node proxy in front of the same upstream as the reference, and the sanity check
// that each target really answers before anything is timed.
import { fileURLToPath } from 'node:url';
import { startChild, type BenchChild } from './child.js';
import type { InferenceServerInfo } from './inference-server.js';

export const MODEL = 'llama-3.1-8b-instruct';
export const CHAT_BODY = JSON.stringify({ model: MODEL, messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 });

export interface ControlPlaneOptions {
  /** postgres://… : the control plane keeps its state there instead of a SQLite file. */
  databaseUrl?: string;
  /** Processes sharing the port (node:cluster, as SVC_WORKERS runs them); needs databaseUrl. */
  workers?: number;
}

export interface InferenceStack {
  upstream: BenchChild<{ baseUrl: string }>;
  /** POST target of the chat path straight at the upstream. */
  directChatUrl: string;
  startControlPlane(options?: ControlPlaneOptions): Promise<ControlPlaneUnderTest>;
  startBareProxy(): Promise<BareProxy>;
  stop(): Promise<void>;
}

export interface ControlPlaneUnderTest {
  child: BenchChild<InferenceServerInfo>;
  /** http://127.0.0.1:port/v1 */
  baseUrl: string;
  auth: Record<string, string>;
  stop(): Promise<void>;
}

export interface BareProxy {
  child: BenchChild<{ port: number }>;
  chatUrl: string;
  stop(): Promise<void>;
}

const helper = (name: string) => fileURLToPath(new URL(`./${name}`, import.meta.url));

/** Starts the upstream; control planes and proxies started from it stop with `stop()`. */
export async function startInferenceStack(): Promise<InferenceStack> {
  const upstream = await startChild<{ baseUrl: string }>(helper('upstream-server.ts'));
  const started: Array<{ stop(): Promise<void> }> = [];
  const replicas = [{ baseUrl: upstream.info.baseUrl, model: MODEL, quantization: 'int4', image: 'bench-upstream' }];
  return {
    upstream,
    directChatUrl: `${upstream.info.baseUrl}/v1/chat/completions`,
    async startControlPlane(options = {}) {
      const env: Record<string, string> = { BENCH_REPLICAS: JSON.stringify(replicas) };
      if (options.databaseUrl) env.BENCH_DATABASE_URL = options.databaseUrl;
      if (options.workers) env.BENCH_WORKERS = String(options.workers);
      // BENCH_CPU_PROF=<dir> profiles the control plane; open the .cpuprofile in Chrome DevTools.
      // BENCH_CPU_PROF_INTERVAL=<us> samples more finely than V8's 1 ms (to see sub-ms stalls).
      const profileDir = process.env.BENCH_CPU_PROF;
      const interval = process.env.BENCH_CPU_PROF_INTERVAL;
      const nodeArgs = profileDir ? ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, ...(interval ? [`--cpu-prof-interval=${interval}`] : [])] : [];
      const child = await startChild<InferenceServerInfo>(helper('inference-server.ts'), { env, nodeArgs, readyTimeoutMs: 120_000 });
      started.push(child);
      return { child, baseUrl: `http://127.0.0.1:${child.info.port}/v1`, auth: { authorization: `Bearer ${child.info.key}` }, stop: () => child.stop() };
    },
    async startBareProxy() {
      const child = await startChild<{ port: number }>(helper('bare-proxy-server.ts'), { env: { BENCH_UPSTREAM: upstream.info.baseUrl } });
      started.push(child);
      return { child, chatUrl: `http://127.0.0.1:${child.info.port}/v1/chat/completions`, stop: () => child.stop() };
    },
    async stop() {
      for (const s of started.reverse()) await s.stop();
      await upstream.stop();
    },
  };
}

/** Refuses to time a target that does not answer 200 with what a correct answer holds. */
export async function assertAnswers(name: string, url: string, body: string, headers: Record<string, string>, marker: string): Promise<void> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  if (res.status !== 200 || !text.includes(marker)) throw new Error(`${name} answered ${res.status}: ${text.slice(0, 300)}`);
}
