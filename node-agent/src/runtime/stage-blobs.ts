// Fetches an instance image's blobs into the registry front's staging folder before dockerd
// is asked for the image (registry-front.ts says why), a few at a time, under the stall
// rule of a pull: a registry that stops sending, or trickles, holds the instance no longer
// than a pull it sent to dockerd would.
import { formatBytes } from './disk-usage.js';
import type { Descriptor } from './image-manifest.js';
import { PullDeadline, type PullDeadlineSettings } from './pull-deadline.js';
import type { PreparedPull } from './registry-front.js';

/** As many as dockerd downloads at once. */
const CONCURRENT_BLOBS = 3;

/** Left free on the staging folder's disk by a staging, for everything else the node writes there. */
export const STAGING_SPARE_BYTES = 1024 ** 3;

/**
 * What a staging under way is counted to write still: what remains of it, but no more than
 * this. A declared size is only a claim (a registry may declare 70 GiB and trickle it), and
 * counted whole it held the disk against every other tenant's pull for as long as the
 * staging lasted; what does arrive is on the disk and in its free space already.
 */
export const STAGING_RESERVE_BYTES = 1024 ** 3;

/** What a staging with `remaining` bytes still to write holds of the disk for the others. */
export const reserved = (remaining: number): number => Math.min(remaining, STAGING_RESERVE_BYTES);

/**
 * Why a staging of `bytes` must not start, or null: the staging folder's disk has `free`
 * bytes, of which the stagings already under way hold `pending` (reserved(): each checked
 * the same free space when it began; counted alone, pulls started together would all fit).
 * Worded for the tenant: the node's free space is not told.
 */
export function stagingRefusal(bytes: number, free: number, pending: number): string | null {
  if (bytes === 0) return null;
  const available = Math.max(0, free - pending - STAGING_SPARE_BYTES);
  if (bytes <= available) return null;
  return `this node has no room to stage the image's blobs new to it (${formatBytes(bytes)}) now`;
}

/** The staging stopped by the stall rule or the pull's timeout; `message` says which, as the pull's do. */
export class StagingStopped extends Error {}

export interface StagingProgress {
  /** Bytes fetched so far, over all blobs. */
  bytes: number;
  /** Bytes to fetch in all. */
  total: number;
  status: string;
}

export async function stageBlobs(
  prepared: Pick<PreparedPull, 'stage'>,
  blobs: readonly Descriptor[],
  options: { deadline: PullDeadlineSettings; report: (progress: StagingProgress) => void; signal?: AbortSignal },
): Promise<void> {
  if (blobs.length === 0) return;
  const total = blobs.reduce((sum, blob) => sum + blob.size, 0);
  const deadline = new PullDeadline(options.deadline, Date.now());
  const stopped = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, stopped.signal]) : stopped.signal;
  let overdue: string | null = null;
  const watch = setInterval(() => {
    overdue = deadline.overdue(Date.now());
    if (overdue) stopped.abort(new StagingStopped(overdue));
  }, Math.min(1_000, options.deadline.stallMs / 4));
  const fetched = new Map<string, number>();
  let done = 0;
  const moved = () => [...fetched.values()].reduce((sum, bytes) => sum + bytes, done);
  const queue = [...blobs];
  const worker = async (): Promise<void> => {
    for (let blob = queue.shift(); blob; blob = queue.shift()) {
      const short = blob.digest.slice('sha256:'.length, 'sha256:'.length + 12);
      fetched.set(blob.digest, 0);
      await prepared.stage(
        blob,
        (bytes) => {
          fetched.set(blob!.digest, bytes);
          const bytesSoFar = moved();
          deadline.moved(bytesSoFar, Date.now());
          options.report({ bytes: bytesSoFar, total, status: `Downloading ${short} (${formatBytes(bytesSoFar)} of ${formatBytes(total)})` });
        },
        signal,
      );
      fetched.delete(blob.digest);
      done += blob.size;
      options.report({ bytes: moved(), total, status: `Download complete ${short}` });
    }
  };
  try {
    const workers = Array.from({ length: Math.min(CONCURRENT_BLOBS, blobs.length) }, () => worker());
    // The first failure ends the others' downloads too, and is thrown once they have ended:
    // a download still closing could otherwise leave files behind the pull's release.
    let first: { err: unknown } | undefined;
    await Promise.all(
      workers.map((running) =>
        running.catch((err: unknown) => {
          first ??= { err };
          stopped.abort(err);
        }),
      ),
    );
    if (first) throw first.err;
  } catch (err) {
    if (overdue) throw new StagingStopped(overdue);
    throw err;
  } finally {
    clearInterval(watch);
    stopped.abort(new Error('staging ended'));
  }
}
