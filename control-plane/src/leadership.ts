// Which process runs the singletons: the instance sweep, the replica reconciler, webhook
// sending and deprecation announcements, the remediation loop and month end. Replicas on
// PostgreSQL elect one with a session advisory lock (store/postgres/advisory-leadership.ts);
// a store only one process opens (SQLite) makes that process the leader for good. The
// election also says how many processes there are (fleet-share.ts divides limits by it).
import { ALONE, type Membership } from './fleet-share.js';

export interface Leadership {
  /** Whether this process runs the singletons right now. */
  isLeader(): boolean;
  /** The processes on the database now, this one included, as of the last election check. */
  membership(): Membership;
  /** Told each change of `isLeader()`; returns an unsubscribe. */
  onChange(listener: (leader: boolean) => void): () => void;
  /** Stops campaigning and gives leadership up, so another process takes over at once. */
  close(): Promise<void>;
}

/** The only process on its store: always the leader. */
export const soleLeader: Leadership = {
  isLeader: () => true,
  membership: () => ALONE,
  onChange: () => () => {},
  close: async () => {},
};

/**
 * Runs `start` while this process leads and `stop` when it stops leading (or the app
 * closes), one at a time: a loss during a start waits for the start to finish. A start or
 * stop that throws goes to `onError` and does not stop later changes from applying.
 */
export function whileLeading(
  leadership: Leadership,
  start: () => void | Promise<void>,
  stop: () => void | Promise<void>,
  onError: (err: unknown) => void = () => {},
): () => Promise<void> {
  let running = false;
  let chain: Promise<void> = Promise.resolve();
  const apply = (leader: boolean): Promise<void> => {
    chain = chain.then(async () => {
      if (leader === running) return;
      running = leader;
      await (leader ? start() : stop());
    }).catch(onError);
    return chain;
  };
  const unsubscribe = leadership.onChange((leader) => void apply(leader));
  void apply(leadership.isLeader());
  return async () => {
    unsubscribe();
    await apply(false);
  };
}
