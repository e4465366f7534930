// The session relay of replicas sharing one PostgreSQL: one LISTEN connection per
// process on AGENT_RELAY_CHANNEL, over which each replica announces the agent sessions
// it opens and ends, and the store announces commands queued for a node. Announcements
// are best effort: when the connection drops they may be missed, so on every (re)connect
// the replica asks all others to announce again (roll call), announces its own, and
// looks for commands queued meanwhile. A replica that dies without a word stays in the
// table until its agents reconnect elsewhere (within seconds) and the new holder
// announces itself; what was queued for the node meanwhile is taken by that holder.
import { newId } from '@svc/shared';
import type { RegistryLogger } from '../nodes/node-registry.js';
import { PgListener } from '../store/postgres/pg-listener.js';
import { AGENT_RELAY_CHANNEL } from '../store/postgres/node-store.js';
import { announcements, parseRelayMessage, SessionHolders, type RelayMessage, type SessionStamp } from './session-holders.js';
import type { SessionRelay } from './session-relay.js';

export class PgSessionRelay implements SessionRelay {
  /** This process, as other replicas know it. */
  readonly replica = newId('cpr');
  localSessions: () => SessionStamp[] = () => [];
  onWork: (nodeId: string) => void = () => {};
  private readonly holders = new SessionHolders();
  private readonly listener: PgListener;
  private closed = false;

  constructor(
    url: string,
    private readonly log: RegistryLogger,
  ) {
    this.listener = new PgListener(url, [AGENT_RELAY_CHANNEL], {
      onNotification: (_channel, payload) => this.hear(payload),
      onConnected: () => this.caughtUp(),
      onLost: (err) => this.log.warn({ err }, 'agent relay: no PostgreSQL connection to listen on; retrying'),
    });
  }

  start(): Promise<void> {
    return this.listener.ready();
  }

  attached(stamp: SessionStamp): void {
    this.publish({ t: 'attach', r: this.replica, s: [stamp] });
  }

  detached(stamp: SessionStamp): void {
    this.publish({ t: 'detach', r: this.replica, s: [stamp] });
  }

  heldElsewhere(nodeId: string): boolean {
    return this.holders.holderOf(nodeId) !== undefined;
  }

  /** The replica that announced the node's session (tests and logs). */
  holderOf(nodeId: string): string | undefined {
    return this.holders.holderOf(nodeId)?.replica;
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.listener.close();
  }

  private publish(message: RelayMessage): void {
    // Not listening right now: the reconnect announces everything again.
    this.listener.notify(AGENT_RELAY_CHANNEL, JSON.stringify(message), (err: unknown) => {
      if (!this.closed) this.log.warn({ err, message: message.t }, 'agent relay: announcement failed; it is repeated when the connection is back');
    });
  }

  private hear(payload: string): void {
    const message = parseRelayMessage(payload);
    if (!message) return;
    if (message.t === 'cmd') return this.onWork(message.n);
    if (message.r === this.replica) return;
    if (message.t === 'rollcall') {
      for (const m of announcements('attach', this.replica, this.localSessions())) this.publish(m);
      return;
    }
    this.holders.apply(message);
  }

  /** Listening (again): what was announced while nobody here listened is asked for again. */
  private caughtUp(): void {
    this.publish({ t: 'rollcall', r: this.replica });
    for (const m of announcements('attach', this.replica, this.localSessions())) this.publish(m);
    for (const [node] of this.localSessions()) this.onWork(node);
  }
}
