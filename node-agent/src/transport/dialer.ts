// Which control plane the agent dials, and the dial itself. SVC_CONTROL_PLANE may name
// several addresses (control-plane replicas): the agent stays on one while its session
// lives and moves to the next when the session ends or a connect fails, round the list.
// A DNS name with several A records is one entry here; grpc-js resolves it and its
// pick_first policy tries each address in turn (250 ms apart when one hangs).
//
// Every attempt first checks that a TCP connection to the address opens within
// `connectTimeoutMs` (1 s): a connect stuck in SYN retransmits (a partition) is dropped
// and retried on a new socket, so the agent is back at most about one connect timeout
// plus one backoff step after the network heals, instead of waiting on the kernel's
// doubling SYN timer. Only then does a fresh channel (its own connection) get
// HANDSHAKE_TIMEOUT_MS for TLS and HTTP/2: a control plane that is up but slow (starting,
// or answering a thousand reconnecting agents) is waited for, not abandoned and hammered.
import { connect } from 'node:net';
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

/** Resolves once a TCP connection to `target` opens (then closes it); rejects after `timeoutMs`. */
function tcpReachable(target: string, timeoutMs: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    // Every address the name resolves to is tried (Node's happy eyeballs), as gRPC would.
    const socket = connect({ host: targetHost(target), port: targetPort(target), autoSelectFamily: true });
    const done = (err?: Error): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
      socket.destroy();
      if (err) reject(err);
      else resolve();
    };
    const timer = setTimeout(() => done(new Error(`no TCP connection within ${timeoutMs} ms`)), timeoutMs);
    const onAbort = (): void => done(new Error('the agent is stopping'));
    if (signal.aborted) return onAbort();
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('connect', () => done());
    socket.once('error', (err) => done(err));
  });
}
