// How one control-plane replica reaches agents whose stream another replica holds.
// With one process (SQLite) there is nobody to relay to: `localOnly` says so. With
// several replicas on PostgreSQL (pg-session-relay.ts) each replica announces the
// sessions it opens and ends, keeps the table of who holds which node, and is woken
// when commands are queued for a node it holds. The commands themselves travel through
// the store (NodeStore.queueRelayedCommand), so their size is not bounded by NOTIFY.
import type { SessionStamp } from './session-holders.js';

export interface SessionRelay {
  /** This replica's sessions now; a roll call is answered with them. Set by the gateway. */
  localSessions: () => SessionStamp[];
  /** Commands may be queued for `nodeId` (set by the gateway: it sends them if it holds the node). */
  onWork: (nodeId: string) => void;
  /** Starts listening; resolves once announcements from other replicas are heard. */
  start(): Promise<void>;
  /** This replica opened (attached) or ended (detached) the session of `stamp`. */
  attached(stamp: SessionStamp): void;
  detached(stamp: SessionStamp): void;
  /** Whether another replica announced the node's live session. */
  heldElsewhere(nodeId: string): boolean;
  close(): Promise<void>;
}

/** One process: every session is local, nothing is announced. */
export function localOnly(): SessionRelay {
  return {
    localSessions: () => [],
    onWork: () => {},
    start: async () => {},
    attached: () => {},
    detached: () => {},
    heldElsewhere: () => false,
    close: async () => {},
  };
}
