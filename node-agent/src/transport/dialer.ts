// Which control plane the agent dials, and the dial itself. SVC_CONTROL_PLANE may name
// several addresses (control-plane replicas): the agent stays on one while its session
// lives and moves to the next when the session ends or a connect fails, round the list.
// A DNS name with several A records is one entry here; grpc-js resolves it and its
// pick_first policy tries each address in turn (250 ms apart when one hangs).
//
// Every attempt first checks that a TCP connection to the address opens within
// `connectTimeoutMs` (1 s), sending a fresh SYN every 250 ms meanwhile: a connect stuck
// in SYN retransmits (a partition) does not hold the agent back, which is back about
// 250 ms after the network heals (or one backoff step, at most 1 s, when the heal comes
// between attempts), instead of waiting on the kernel's doubling SYN timer. Only then does a fresh channel (its own connection) get
// HANDSHAKE_TIMEOUT_MS for TLS and HTTP/2: a control plane that is up but slow (starting,
// or answering a thousand reconnecting agents) is waited for, not abandoned and hammered.
import { connect, type Socket } from 'node:net';
import type * as grpc from '@grpc/grpc-js';
import type { AgentGatewayClient } from '@svc/proto';
import { SessionEndedError } from '../session/session-errors.js';
import { targetHost, targetPort } from './address.js';
import { channelCredentials, createGatewayClient, type TransportConfig } from './channel.js';

/** How long a channel whose TCP connection opened may take to be ready (TLS, HTTP/2 settings). */
export const HANDSHAKE_TIMEOUT_MS = 10_000;

/** The address after `current` in the list, round it (pure). */
export function nextTargetIndex(current: number, count: number): number {
  return count === 0 ? 0 : (current + 1) % count;
}

export interface DialerConfig extends TransportConfig {
  controlPlanes: string[];
  connectTimeoutMs: number;
}

export class ControlPlaneDialer {
  private index = 0;
  private readonly credentials: grpc.ChannelCredentials;

  /** Reads the TLS files now: a missing one fails at start, not at the first dial. */
  constructor(private readonly config: DialerConfig) {
    if (config.controlPlanes.length === 0) throw new Error('no control-plane address to dial');
    this.credentials = channelCredentials(config);
  }

  /** The address the next attempt dials. */
  get target(): string {
    return this.config.controlPlanes[this.index]!;
  }

  /**
   * A client whose connection to the current address is ready, within the connect
   * timeout. On failure the client is closed, the next attempt dials the next address,
   * and a SessionEndedError says what failed (the reconnect loop retries it).
   */
  async connect(signal: AbortSignal): Promise<AgentGatewayClient> {
    const target = this.target;
    try {
      await tcpReachable(target, this.config.connectTimeoutMs, signal);
    } catch (err) {
      this.moveOn();
      throw new SessionEndedError(`cannot reach the control plane at ${target}: ${(err as Error).message}`, { cause: err });
    }
    const client = createGatewayClient(this.config, target, this.credentials);
    try {
      await new Promise<void>((resolve, reject) => {
        const onAbort = (): void => reject(new SessionEndedError('the agent is stopping'));
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        client.waitForReady(Date.now() + HANDSHAKE_TIMEOUT_MS, (err) => {
          signal.removeEventListener('abort', onAbort);
          if (err) reject(new SessionEndedError(`the control plane at ${target} accepted the connection but was not ready within ${HANDSHAKE_TIMEOUT_MS} ms`, { cause: err }));
          else resolve();
        });
      });
      return client;
    } catch (err) {
      client.close();
      this.moveOn();
      throw err;
    }
  }

  /** The session on the current address is over: the next attempt dials the next address. */
  moveOn(): void {
    this.index = nextTargetIndex(this.index, this.config.controlPlanes.length);
  }
}

/** How often a probe that has not connected yet is joined by a fresh one. */
export const PROBE_STAGGER_MS = 250;

/**
 * Resolves once a TCP connection to `target` opens (then closes it); rejects after
 * `timeoutMs`, or at once when the address answers with an error (refused, unreachable).
 *
 * While no probe has connected, a fresh one starts every PROBE_STAGGER_MS, the earlier
 * ones still waiting: a SYN dropped during a partition is retransmitted by the kernel
 * only after a second or more, so after the network heals the next fresh SYN, at most
 * PROBE_STAGGER_MS away, is what gets through.
 */
function tcpReachable(target: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const sockets: Socket[] = [];
    let settled = false;
    const done = (err?: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearInterval(stagger);
      signal.removeEventListener('abort', onAbort);
      for (const socket of sockets) socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    const probe = (): void => {
      // Every address the name resolves to is tried (Node's happy eyeballs), as gRPC would.
      const socket = connect({ host: targetHost(target), port: targetPort(target), autoSelectFamily: true });
      sockets.push(socket);
      socket.once('connect', () => done());
      socket.once('error', (err) => done(err));
    };
    const timer = setTimeout(() => done(new Error(`no TCP connection within ${timeoutMs} ms`)), timeoutMs);
    const stagger = setInterval(probe, PROBE_STAGGER_MS);
    const onAbort = (): void => done(new Error('the agent is stopping'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    probe();
  });
}
