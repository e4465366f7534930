// With SVC_WORKERS > 1 each worker counts what it served, but a scraper reaches whichever
// worker the kernel hands its connection to. So a worker's GET /metrics asks the primary,
// which gathers every worker's registry and merges them (prom-client's AggregatorRegistry,
// by each metric's `aggregator`): counters and histograms add up across workers, a gauge
// every worker reads from the shared store is taken once ('first'). The answer is the same
// whichever worker serves it, and counters never jump back when the scrape lands elsewhere.
import cluster from 'node:cluster';
import { AggregatorRegistry, type Registry } from 'prom-client';

const REQUEST = 'svc:metrics-request';
const ANSWER = 'svc:metrics-answer';
/** prom-client gives the workers 5 s to answer the primary; a little more for the relay. */
const ANSWER_TIMEOUT_MS = 6_000;

interface MetricsRequest {
  type: typeof REQUEST;
  id: number;
}

interface MetricsAnswer {
  type: typeof ANSWER;
  id: number;
  text?: string;
  error?: string;
}

const isRequest = (m: unknown): m is MetricsRequest => typeof m === 'object' && m !== null && (m as { type?: unknown }).type === REQUEST;
const isAnswer = (m: unknown): m is MetricsAnswer => typeof m === 'object' && m !== null && (m as { type?: unknown }).type === ANSWER;

/** In the primary: answers each worker's request with every worker's metrics, merged. */
export function serveMergedMetrics(): void {
  const aggregator = new AggregatorRegistry();
  cluster.on('message', (worker, message: unknown) => {
    if (!isRequest(message)) return;
    const reply = (answer: Omit<MetricsAnswer, 'type' | 'id'>) => {
      if (worker.isConnected()) worker.send({ type: ANSWER, id: message.id, ...answer });
    };
    aggregator.clusterMetrics().then(
      (text) => reply({ text }),
      (err: unknown) => reply({ error: err instanceof Error ? err.message : String(err) }),
    );
  });
}

/**
 * In a worker: offers `registry` to the primary's merges and returns what GET /metrics
 * serves, the merged text (rejects if the primary does not answer in time).
 */
export function mergedMetricsSource(registry: Registry): () => Promise<string> {
  AggregatorRegistry.setRegistries([registry]);
  // Constructing one is what makes prom-client answer the primary's requests in a worker.
  new AggregatorRegistry();
  const waiting = new Map<number, { resolve(text: string): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  let nextId = 0;
  process.on('message', (message: unknown) => {
    if (!isAnswer(message)) return;
    const w = waiting.get(message.id);
    if (!w) return;
    waiting.delete(message.id);
    clearTimeout(w.timer);
    if (message.text !== undefined) w.resolve(message.text);
    else w.reject(new Error(`the primary could not merge the workers' metrics: ${message.error ?? 'no answer'}`));
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = nextId++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the primary did not answer with the merged metrics within ${ANSWER_TIMEOUT_MS} ms`));
      }, ANSWER_TIMEOUT_MS);
      waiting.set(id, { resolve, reject, timer });
      process.send?.({ type: REQUEST, id } satisfies MetricsRequest);
    });
}
