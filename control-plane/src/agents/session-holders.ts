// Which control-plane replica holds each agent's stream, as the replicas announce it to
// one another (several replicas on one PostgreSQL, see pg-session-relay.ts): the
// messages of the announcement channel and the table they build. Pure: no I/O here.
//
// A session is named by its replica and the time it opened (`since`). An announcement of
// a newer session replaces an older one; the end of a session removes the entry only if
// it is still that session, so a late "ended" from the replica an agent just left never
// erases the replica it moved to.

/** [node id, session opened at (ms)] */
export type SessionStamp = [string, number];

export type RelayMessage =
  /** Commands are queued for node `n` (relayed task commands, operator commands). */
  | { t: 'cmd'; n: string }
  /** Replica `r` holds these sessions. */
  | { t: 'attach'; r: string; s: SessionStamp[] }
  /** Replica `r` no longer holds these sessions. */
  | { t: 'detach'; r: string; s: SessionStamp[] }
  /** Replica `r` (just started, or its listening connection came back) asks every replica to announce its sessions. */
  | { t: 'rollcall'; r: string };

/** NOTIFY payloads must stay under 8000 bytes: announcements go out in chunks of this many sessions. */
export const STAMPS_PER_MESSAGE = 50;

const isStamp = (v: unknown): v is SessionStamp => Array.isArray(v) && v.length === 2 && typeof v[0] === 'string' && typeof v[1] === 'number';

/** A message from the channel, or null for anything malformed (ignored, never fatal). */
export function parseRelayMessage(text: string): RelayMessage | null {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof value !== 'object' || value === null) return null;
  const m = value as Record<string, unknown>;
  switch (m.t) {
    case 'cmd':
      return typeof m.n === 'string' ? { t: 'cmd', n: m.n } : null;
    case 'attach':
    case 'detach':
      return typeof m.r === 'string' && Array.isArray(m.s) && m.s.every(isStamp) ? { t: m.t, r: m.r, s: m.s } : null;
    case 'rollcall':
      return typeof m.r === 'string' ? { t: 'rollcall', r: m.r } : null;
    default:
      return null;
  }
}

/** `stamps` as announcement messages of at most STAMPS_PER_MESSAGE sessions each. */
export function announcements(t: 'attach' | 'detach', replica: string, stamps: SessionStamp[]): RelayMessage[] {
  const out: RelayMessage[] = [];
  for (let i = 0; i < stamps.length; i += STAMPS_PER_MESSAGE) out.push({ t, r: replica, s: stamps.slice(i, i + STAMPS_PER_MESSAGE) });
  return out;
}

export interface Holder {
  replica: string;
  since: number;
}

/** The sessions other replicas announced, by node. */
export class SessionHolders {
  private readonly byNode = new Map<string, Holder>();

  apply(message: RelayMessage): void {
    if (message.t === 'attach') {
      for (const [node, since] of message.s) {
        const current = this.byNode.get(node);
        if (!current || since >= current.since) this.byNode.set(node, { replica: message.r, since });
      }
    } else if (message.t === 'detach') {
      for (const [node, since] of message.s) {
        const current = this.byNode.get(node);
        if (current && current.replica === message.r && current.since === since) this.byNode.delete(node);
      }
    }
  }

  holderOf(nodeId: string): Holder | undefined {
    return this.byNode.get(nodeId);
  }
}
