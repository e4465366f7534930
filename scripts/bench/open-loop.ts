// An open-loop load at a fixed rate: request i is due at start + i / rate, whether or not
// earlier ones have answered, and its latency counts from when it was due (so a stall
// shows up in every request it delays, as wrk2 measures; no coordinated omission).
// autocannon's fixed rate gives each connection its own timer, and those fire together:
// bursts that add queueing the server did not cause.
import { Pool } from 'undici';
import { percentile } from './format.js';

export interface OpenLoopOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  ratePerSecond: number;
  seconds: number;
  /** Connections the requests share; more than the rate ever keeps busy. */
  connections: number;
}

export interface OpenLoopResult {
  sent: number;
  p50Ms: number;
  p99Ms: number;
  /** Requests per second that completed. */
  achievedRate: number;
}

export async function runOpenLoop(options: OpenLoopOptions): Promise<OpenLoopResult> {
  const url = new URL(options.url);
  const pool = new Pool(url.origin, { connections: options.connections, pipelining: 1 });
  const latencies: number[] = [];
  const failures: string[] = [];
  const total = Math.round(options.ratePerSecond * options.seconds);
  const interval = 1000 / options.ratePerSecond;
  const inFlight: Array<Promise<void>> = [];
  const started = performance.now();
  try {
    for (let i = 0; i < total; i++) {
      const due = started + i * interval;
      // Timers fire on whole milliseconds at best: a request may leave up to ~1 ms late,
      // and that counts in its latency, alike for both paths compared.
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      inFlight.push(
        pool
          .request({ path: url.pathname, method: 'POST', headers: { 'content-type': 'application/json', ...options.headers }, body: options.body })
          .then(
            async (res) => {
              await res.body.dump();
              if (res.statusCode !== 200) failures.push(`status ${res.statusCode}`);
              latencies.push(performance.now() - due);
            },
            (err: Error) => void failures.push(err.message),
          ),
      );
    }
    await Promise.all(inFlight);
  } finally {
    await pool.close();
  }
  const elapsed = (performance.now() - started) / 1000;
  if (failures.length > 0) throw new Error(`open-loop run against ${options.url} had ${failures.length} failures, e.g. ${failures[0]}`);
  return { sent: total, p50Ms: percentile(latencies, 50), p99Ms: percentile(latencies, 99), achievedRate: latencies.length / elapsed };
}
