// The primary of SVC_WORKERS > 1: forks the workers (each a whole control plane on the
// shared PostgreSQL store; node:cluster hands every worker the same HTTP, gRPC and
// operator listening sockets), restarts a worker that dies with backoff, and on
// SIGTERM/SIGINT passes SIGTERM to each worker so it drains like a single process does.
// The primary itself serves no requests and opens no database connection; it only merges
// the workers' metrics when one of them is scraped (merged-metrics.ts).
import cluster, { type Worker } from 'node:cluster';
import type { Logger } from '@svc/shared';
import { serveMergedMetrics } from './merged-metrics.js';
import { nextCrashStreak, restartDelayMs } from './restart-policy.js';

/** What a worker sends the primary once its control plane listens. */
export const WORKER_READY = 'svc:worker-ready';

export interface PrimaryOptions {
  workers: number;
  log: Logger;
  /** How long workers may drain after SIGTERM before they are killed. */
  drainMs: number;
}

interface Slot {
  worker: Worker;
  startedAt: number;
  ready: boolean;
  streak: number;
}

export interface Primary {
  /** Resolves once every worker has said it is ready (rejects if the primary stops first). */
  ready: Promise<void>;
  /** Resolves with the exit code once every worker has stopped. */
  exited: Promise<number>;
  /** SIGTERM to every worker (a drain), SIGKILL to those still running after `drainMs`. */
  stop(reason: string): void;
}

/** Forks the workers and keeps them running until `stop`. */
export function startPrimary({ workers, log, drainMs }: PrimaryOptions): Primary {
  const slots = new Map<number, Slot>();
  let stopping = false;
  let everReady = false;
  let readyCount = 0;
  /** What the primary exits with: 0 after a stop, the failed worker's code when none could start. */
  let exitCode = 0;
  const restarts = new Set<NodeJS.Timeout>();
  let allReady!: () => void;
  let neverReady!: (err: Error) => void;
  const ready = new Promise<void>((resolve, reject) => {
    allReady = resolve;
    neverReady = reject;
  });
  ready.catch(() => {});
  let stop!: (reason: string) => void;

  serveMergedMetrics(() => [...slots.values()].filter((s) => s.ready).map((s) => s.worker));

  const exited = new Promise<number>((resolve) => {
    const fork = (streak: number): void => {
      const worker = cluster.fork();
      const slot: Slot = { worker, startedAt: Date.now(), ready: false, streak };
      slots.set(worker.id, slot);
      worker.on('message', (message: unknown) => {
        if (message !== WORKER_READY || slot.ready) return;
        slot.ready = true;
        everReady = true;
        if (++readyCount === workers) allReady();
        log.info({ worker_pid: worker.process.pid, workers: slots.size }, 'worker ready');
      });
      worker.once('exit', (code, signal) => {
        slots.delete(worker.id);
        if (stopping) {
          if (slots.size === 0) resolve(exitCode);
          return;
        }
        // No worker ever started: a configuration or store error every worker would hit
        // the same way. Stop with its code instead of restarting in a loop.
        if (!everReady && !slot.ready) {
          log.error({ worker_pid: worker.process.pid, code, signal }, 'a worker failed to start; stopping');
          stopping = true;
          exitCode = code || 1;
          neverReady(new Error(`a worker failed to start (code ${code}, signal ${signal})`));
          for (const other of slots.values()) other.worker.process.kill('SIGTERM');
          if (slots.size === 0) resolve(exitCode);
          return;
        }
        const nextStreak = nextCrashStreak(slot.streak, Date.now() - slot.startedAt);
        const delayMs = restartDelayMs(nextStreak);
        log.warn({ worker_pid: worker.process.pid, code, signal, restart_in_ms: delayMs }, 'worker exited; restarting it');
        const timer = setTimeout(() => {
          restarts.delete(timer);
          if (!stopping) fork(nextStreak);
        }, delayMs);
        restarts.add(timer);
      });
    };

    stop = (reason: string): void => {
      if (stopping) return;
      stopping = true;
      neverReady(new Error(`stopped (${reason}) before every worker was ready`));
      for (const timer of restarts) clearTimeout(timer);
      log.info({ reason, workers: slots.size }, 'stopping workers');
      if (slots.size === 0) return resolve(exitCode);
      for (const slot of slots.values()) slot.worker.process.kill('SIGTERM');
      setTimeout(() => {
        for (const slot of slots.values()) {
          log.warn({ worker_pid: slot.worker.process.pid }, 'worker did not drain in time; killing it');
          slot.worker.process.kill('SIGKILL');
        }
      }, drainMs).unref();
    };
    for (let i = 0; i < workers; i++) fork(0);
  });
  return { ready, exited, stop: (reason) => stop(reason) };
}
