// WAL checkpoints off the event loop. In WAL mode with synchronous=NORMAL a commit never
// waits for the disk; only a checkpoint does (it fsyncs the database file), and SQLite
// runs it inside whichever commit crosses the WAL threshold, stalling every request in
// flight for the length of an fsync (measured: p99 of inference requests 15 ms instead
// of 4 ms). The server turns the automatic checkpoint off on its connection and lets a
// worker thread with its own connection checkpoint (PASSIVE: never blocks writers).
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type Database from 'better-sqlite3';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file);
db.pragma('busy_timeout = 5000');
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
  } catch (err) {
    parentPort.postMessage({ error: String(err && err.message || err) });
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export interface BackgroundCheckpoints {
  stop(): Promise<void>;
}

export function checkpointInBackground(
  db: Database.Database,
  options: { everyMs: number; onError: (message: string) => void },
): BackgroundCheckpoints {
  db.pragma('wal_autocheckpoint = 0');
  const worker = new Worker(WORKER, {
    eval: true,
    workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), file: db.name, everyMs: options.everyMs },
  });
  worker.unref();
  // If the worker cannot checkpoint, the WAL would grow without bound: SQLite checkpoints again.
  const fallBack = (message: string): void => {
    if (db.open) db.pragma('wal_autocheckpoint = 1000');
    options.onError(message);
  };
  worker.on('message', (m: { error?: string }) => m.error && fallBack(m.error));
  worker.on('error', (err) => fallBack(err.message));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async stop() {
      // Held while it stops: a worker still starting (a store closed right after it
      // opened) would otherwise leave nothing keeping the process alive, and the await
      // below would end the process instead of returning.
      worker.ref();
      worker.postMessage('stop');
      await exited;
      // What the worker did not get to: one last checkpoint while nothing else writes.
      if (db.open) db.pragma('wal_checkpoint(TRUNCATE)');
    },
  };
}
