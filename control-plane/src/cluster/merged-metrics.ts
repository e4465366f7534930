// With SVC_WORKERS > 1 each worker counts what it served, but a scraper reaches whichever
// worker the kernel hands its connection to. So a worker's GET /metrics asks the primary,
// which collects every ready worker's registry (as JSON, over the cluster channel) and
// merges them with prom-client's AggregatorRegistry.aggregate, by each metric's
// `aggregator`: counters and histograms add up across workers, a gauge every worker reads
// from the shared store is taken once ('first'). The answer is the same whichever worker
// serves it, and counters never jump back when the scrape lands elsewhere.
//
// Only workers that said they are ready are asked: one still starting (loading its
// modules, opening the store) has nothing to count yet and could not answer.
import type { Worker } from 'node:cluster';
import cluster from 'node:cluster';
import { AggregatorRegistry, type MetricObjectWithValues, type MetricValue, type Registry } from 'prom-client';

type RegistryJson = MetricObjectWithValues<MetricValue<string>>[];

/** worker -> primary: a scrape wants everyone's metrics. */
const SCRAPE = 'svc:metrics-scrape';
/** primary -> worker: the merged text (or why there is none). */
const MERGED = 'svc:metrics-merged';
/** primary -> worker: send your registry. */
const COLLECT = 'svc:metrics-collect';
/** worker -> primary: its registry as JSON. */
const COLLECTED = 'svc:metrics-collected';

/** How long the primary waits for each worker's registry. */
const COLLECT_TIMEOUT_MS = 3_000;
/** How long a worker waits for the primary's merge (its collection, plus the relay). */
const MERGE_TIMEOUT_MS = 5_000;

interface Message {
  type: string;
  id: number;
  text?: string;
  error?: string;
  metrics?: RegistryJson;
}

const asMessage = (m: unknown, type: string): Message | undefined =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === type && typeof (m as { id?: unknown }).id === 'number' ? (m as Message) : undefined;

/** How long a merged exposition answers later scrapes too (Prometheus scrapes every 15 s or more). */
export const MERGED_REUSE_MS = 1_000;

/**
 * `produce`, called at most once at a time and at most once per `maxAgeMs`: a caller
 * arriving while a call runs shares it, one arriving within `maxAgeMs` of a finished call
 * gets its result. GET /metrics needs no API key, so without this anyone could make every
 * worker serialize its registry for each of their requests; with it, a flood of scrapes
 * costs one merge a second.
 */
export function reuseRecent<T>(produce: () => Promise<T>, maxAgeMs: number, now: () => number = () => performance.now()): () => Promise<T> {
  let running: Promise<T> | undefined;
  let last: { at: number; value: T } | undefined;
  return () => {
    if (running) return running;
    if (last && now() - last.at < maxAgeMs) return Promise.resolve(last.value);
    running = produce().then(
      (value) => {
        last = { at: now(), value };
        running = undefined;
        return value;
      },
      (err: unknown) => {
        running = undefined;
        throw err;
      },
    );
    return running;
  };
}

/** In the primary: answers each worker's scrape with the metrics of every ready worker, merged. */
export function serveMergedMetrics(readyWorkers: () => Worker[]): void {
  let nextCollection = 0;
  const collections = new Map<number, { pending: Set<number>; gathered: RegistryJson[]; finish(): void }>();

  const merge = reuseRecent(
    (): Promise<string> =>
      new Promise((resolve, reject) => {
        const id = nextCollection++;
        const workers = readyWorkers().filter((w) => w.isConnected());
        const gathered: RegistryJson[] = [];
        const finish = (): void => {
          clearTimeout(timer);
          collections.delete(id);
          // A worker that did not answer in time is left out: its counts are missing from
          // this scrape (as after a restart), rather than every worker's being lost to it.
          Promise.resolve()
            .then(() => AggregatorRegistry.aggregate(gathered).metrics())
            .then(resolve, reject);
        };
        const timer = setTimeout(finish, COLLECT_TIMEOUT_MS);
        collections.set(id, { pending: new Set(workers.map((w) => w.id)), gathered, finish });
        for (const w of workers) w.send({ type: COLLECT, id });
        if (workers.length === 0) finish();
      }),
    MERGED_REUSE_MS,
  );

  cluster.on('message', (worker, raw: unknown) => {
    const collected = asMessage(raw, COLLECTED);
    if (collected) {
      const c = collections.get(collected.id);
      if (!c || !c.pending.delete(worker.id)) return;
      if (collected.metrics) c.gathered.push(collected.metrics);
      if (c.pending.size === 0) c.finish();
      return;
    }
    const scrape = asMessage(raw, SCRAPE);
    if (!scrape) return;
    merge().then(
      (text) => worker.isConnected() && worker.send({ type: MERGED, id: scrape.id, text }),
      (err: unknown) => worker.isConnected() && worker.send({ type: MERGED, id: scrape.id, error: err instanceof Error ? err.message : String(err) }),
    );
  });
}

/**
 * In a worker: gives `registry` to the primary's merges and returns what GET /metrics
 * serves, every worker's metrics merged (rejects if the primary does not answer in time).
 */
export function mergedMetricsSource(registry: Registry): () => Promise<string> {
  const waiting = new Map<number, { resolve(text: string): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
  let nextScrape = 0;
  process.on('message', (raw: unknown) => {
    const collect = asMessage(raw, COLLECT);
    if (collect) {
      void registry.getMetricsAsJSON().then(
        (metrics) => process.send?.({ type: COLLECTED, id: collect.id, metrics }),
        () => process.send?.({ type: COLLECTED, id: collect.id }),
      );
      return;
    }
    const merged = asMessage(raw, MERGED);
    const w = merged && waiting.get(merged.id);
    if (!merged || !w) return;
    waiting.delete(merged.id);
    clearTimeout(w.timer);
    if (merged.text !== undefined) w.resolve(merged.text);
    else w.reject(new Error(`the primary could not merge the workers' metrics: ${merged.error ?? 'no answer'}`));
  });
  return () =>
    new Promise<string>((resolve, reject) => {
      const id = nextScrape++;
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`the primary did not answer with the merged metrics within ${MERGE_TIMEOUT_MS} ms`));
      }, MERGE_TIMEOUT_MS);
      waiting.set(id, { resolve, reject, timer });
      process.send?.({ type: SCRAPE, id });
    });
}
