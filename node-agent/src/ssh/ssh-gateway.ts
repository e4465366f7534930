// The node's SSH gateway (ssh2 as the server): one port for every instance on the node.
// The user name is the instance id; only the public keys given when the instance was
// created authenticate. Sessions, SFTP and `ssh -L` forwarding are carried out inside the
// container (ssh-session.ts), so images need no sshd. A stopping instance takes no new
// connections; a gone one has its connections closed.
//
// The gateway owns its TCP listener and hands sockets to ssh2 only after counting them
// (connection-book.ts): connections still logging in, per source and per instance are
// capped, a login must finish within a time limit, failed attempts are capped, a source
// whose connections keep ending without a login is refused for a while (ssh-penalties.ts),
// and a connection holds a bounded number of channels. Once logged in, a connection shares
// its instance's bandwidth with the instance's other connections (throttled-socket.ts), and
// the instances logged in share the node's SSH budget equally.
import { InstanceBudgets } from '../access/instance-budget.js';
import { connect, createServer, type Server as NetServer, type Socket } from 'node:net';
import { listenOn } from '../access/listen.js';
import type Docker from 'dockerode';
import ssh2, { type Connection, type ServerChannel } from 'ssh2';
import type { Logger } from '@svc/shared';
import type { AccessEntry, AccessRegistry } from '../access/access-registry.js';
import { publicKeyAccepted } from './authorized-keys.js';
import type { HostKey } from './host-key.js';
import { PACE_BURST_SECONDS, ENGINE_CALL_COST, InstancePacer, type EngineCallKind } from '../access/instance-pacer.js';
import { ConnectionBook, type ConnectionTicket } from './connection-book.js';
import { forwardTarget } from './session-request.js';
import { handleSession, type SessionHandle, type SessionLimits } from './ssh-session.js';
import { ThrottledSocket, type Throttle } from '../access/throttled-socket.js';
import { LinkBudget, TokenBucket } from '../access/token-bucket.js';
import { RefusalLog } from '../access/refusal-log.js';
import { penaltyHolder, SourcePenalties, type PenaltyPolicy } from '../access/source-penalties.js';
import type { KernelDropList } from '../access/kernel-drop.js';
import { sshPenaltyOf, type ConnectionEnding, type SshPenaltyKind } from './ssh-penalties.js';

const { Server } = ssh2;

/**
 * The key exchanges the gateway offers, the cheap ones. Anyone who reaches the port picks
 * one before logging in, and ssh2 offers finite-field groups up to 8,192 bits by default:
 * measured with Node's crypto, group 18 costs the gateway's one thread about 10 ms a
 * connection and NIST P-521 4 ms, where curve25519 costs 0.5 ms and P-256 0.1 ms. Kept:
 * curve25519 (every OpenSSH since 6.5, PuTTY since 0.68), P-256 and group 14 (FIPS-mode
 * clients, which refuse curve25519; group 14 costs 0.5 ms).
 */
export const GATEWAY_KEX = ['curve25519-sha256', 'curve25519-sha256@libssh.org', 'ecdh-sha2-nistp256', 'diffie-hellman-group14-sha256'] as const;
/** Key re-exchanges a connection may ask for: one every 2 s on average, 10 at once. */
export const REKEYS_PER_SECOND = 0.5;
export const REKEY_BURST = 10;

/**
 * The most a client may send before it has logged in. A login is a few KiB: the key
 * exchange, and at most SVC_SSH_MAX_AUTH_TRIES keys of up to 16,384 bits with their
 * signatures. Everything received is decrypted on the gateway's one thread, and until a
 * login nothing else holds a connection back: measured, one client sending
 * SSH_MSG_IGNORE packets over loopback before logging in pushed 1 GB a second through and
 * kept the gateway at more than a core for as long as it went on.
 */
export const PRE_LOGIN_BYTES = 256 * 1024;
// And no compression: ssh2 inflates each packet whole, with no limit on what comes out, and
// `zlib` starts right after the key exchange, before any login. Measured: 20 packets of
// 30 KB, each 30 MiB of zeros compressed, cost the gateway's thread 540 ms and 118 MiB,
// so a stranger sending 1 MB a second would keep it busy. `ssh -C` falls back to none.

export interface SshGatewayOptions {
  registry: AccessRegistry;
  docker: Docker;
  hostKey: HostKey;
  log: Logger;
  host: string;
  /** 0 picks a free port. */
  port: number;
  limits: SshLimits;
  /** Where penalized sources are also dropped by the kernel (access/kernel-drop.ts); absent: refused here only. */
  kernelDrop?: KernelDropList;
}

export interface SshLimits extends SessionLimits {
  maxChannelsPerConnection: number;
  maxConnectionsPerInstance: number;
  maxConnectionsPerSource: number;
  maxPendingHandshakes: number;
  handshakeTimeoutMs: number;
  maxAuthTries: number;
  /** Penalties for connections that end without logging in (SVC_SSH_SOURCE_PENALTIES); null: none. */
  penalties: PenaltyPolicy<SshPenaltyKind> | null;
  /** Mbit/s each way through the gateway for all instances together, shared equally (SVC_SSH_NODE_MBPS). */
  nodeMbps: number;
  /** Docker engine calls a second each instance's SSH and SFTP may make, an exec counting 8 (SVC_SSH_ENGINE_CALLS_PER_SECOND); 0: unpaced. */
  engineCallsPerSecond: number;
}

/** Dead peers are noticed after ~45 s of silence (15 s keepalives, 3 unanswered). */
const KEEPALIVE_INTERVAL_MS = 15_000;
const KEEPALIVE_COUNT_MAX = 3;

export class SshGateway {
  private readonly server: ssh2.Server;
  private readonly tcp: NetServer;
  private readonly book: ConnectionBook;
  private readonly pacer: InstancePacer;
  /** Sockets handed to ssh2, by remote address and port, until ssh2 reports the connection. */
  private readonly tickets = new Map<string, { ticket: ConnectionTicket; ending: ConnectionEnding }>();
  private readonly penalties: SourcePenalties<SshPenaltyKind> | undefined;
  private readonly connections = new Set<Connection>();
  /** What each instance's SFTP sessions hold on the node (staged uploads, listings), across its sessions. */
  private readonly stageBudgets: InstanceBudgets;
  private readonly listingBudgets: InstanceBudgets;
  private readonly sockets = new Set<Socket>();
  private readonly budget: LinkBudget;
  private listeningPort = 0;
  private readonly refusals: RefusalLog;

  constructor(private readonly options: SshGatewayOptions) {
    this.stageBudgets = new InstanceBudgets(options.limits.sftp.stageBudgetBytes);
    this.listingBudgets = new InstanceBudgets(options.limits.sftp.listingBudgetBytes);
    this.server = new Server(
      {
        hostKeys: [options.hostKey.privateKey],
        algorithms: { kex: [...GATEWAY_KEX], compress: ['none'] },
        ident: 'svc-gateway',
        keepaliveInterval: KEEPALIVE_INTERVAL_MS,
        keepaliveCountMax: KEEPALIVE_COUNT_MAX,
      },
      (client, info) => this.accept(client, info.ip, info.port),
    );
    this.server.on('error', (err: Error) => options.log.error({ err }, 'SSH gateway error'));
    this.book = new ConnectionBook(options.limits);
    this.refusals = new RefusalLog(options.log);
    this.penalties = options.limits.penalties ? new SourcePenalties(options.limits.penalties) : undefined;
    this.pacer = new InstancePacer(options.limits.engineCallsPerSecond, options.limits.engineCallsPerSecond * PACE_BURST_SECONDS);
    this.budget = new LinkBudget(options.limits.nodeMbps);
    this.tcp = createServer((socket) => this.admit(socket));
  }

  /** Counts a new TCP connection; closes it when a cap says no, else gives it to ssh2 with a login deadline. */
  private admit(socket: Socket): void {
    const { limits } = this.options;
    const source = socket.remoteAddress ?? 'unknown';
    // A penalized source is refused before ssh2 sees the socket: no banner, no key exchange.
    const penalized = this.penalties?.refusedFor(source);
    if (penalized) {
      this.refusals.note(source, `${penaltyHolder(penalized)} penalized ${Math.ceil(penalized.ms / 1000)} s more for connections that ended without logging in (SVC_SSH_SOURCE_PENALTIES)`, 'SSH connection refused');
      this.options.kernelDrop?.keep(source, penalized);
      socket.destroy();
      return;
    }
    // Counted by network (an IPv6 client has a /64 of addresses to open connections from)
    // and, for the handshake slots, by site; a handshake dropped for a fairer claim is closed.
    const admission = this.book.open(source, (why) => {
      this.refusals.note(source, why, 'SSH handshake dropped');
      socket.destroy();
    });
    if (!admission.ok) {
      this.refusals.note(source, admission.reason, 'SSH connection refused');
      socket.destroy();
      return;
    }
    const ticket = admission.ticket;
    const ending: ConnectionEnding = { loggedIn: false, failedLogins: 0, graceExceeded: false };
    const key = `${source}|${socket.remotePort}`;
    this.tickets.set(key, { ticket, ending });
    this.sockets.add(socket);
    const deadline = setTimeout(() => {
      if (ticket.instanceId !== undefined) return;
      ending.graceExceeded = true;
      this.options.log.info({ ip: source, timeout_ms: limits.handshakeTimeoutMs }, 'SSH connection closed: no login in time');
      socket.destroy();
    }, limits.handshakeTimeoutMs);
    deadline.unref();
    socket.once('close', () => {
      clearTimeout(deadline);
      ending.loggedIn = ticket.instanceId !== undefined;
      this.penalize(source, ending);
      ticket.close();
      this.tickets.delete(key);
      this.sockets.delete(socket);
    });
    socket.on('error', () => undefined);
    // Ends the connection at the chunk that goes past, whatever ssh2 makes of it.
    let beforeLogin = 0;
    const countBeforeLogin = (chunk: Buffer): void => {
      if (ticket.instanceId !== undefined) return void socket.off('data', countBeforeLogin);
      beforeLogin += chunk.length;
      if (beforeLogin <= PRE_LOGIN_BYTES) return;
      ending.graceExceeded = true;
      this.options.log.info({ ip: source, bytes: beforeLogin }, 'SSH connection closed: sent more than a login takes');
      socket.destroy();
    };
    socket.on('data', countBeforeLogin);
    this.server.injectSocket(new ThrottledSocket(socket, () => this.throttleOf(ticket.instanceId)) as unknown as Socket);
  }

  /**
   * The buckets a logged-in connection shares with its instance's others: the instance's
   * bandwidth, or its equal share of the node's SSH budget (SVC_SSH_NODE_MBPS) among the
   * instances logged in now, when that is less. Every byte through here costs the agent's
   * one thread its encryption and `dockerd` its exec stream, on the host's CPU.
   */
  private throttleOf(instanceId: string | undefined): Throttle | undefined {
    const entry = instanceId === undefined ? undefined : this.options.registry.current(instanceId);
    return entry && this.budget.linkOf(entry, entry.networkMbps, this.book.instancesConnected);
  }

  /** Waits until the instance may make one more engine call of this kind (instance-pacer.ts). */
  private pace(instanceId: string, kind: EngineCallKind): Promise<void> {
    return this.pacer.pace(instanceId, ENGINE_CALL_COST[kind]);
  }

  /** A connection that made the agent work and left without logging in costs its source. */
  private penalize(source: string, ending: ConnectionEnding): void {
    const kind = sshPenaltyOf(ending);
    if (kind === undefined) return;
    const refusedFor = this.penalties?.penalize(source, kind);
    if (!refusedFor) return;
    this.options.kernelDrop?.drop(source, refusedFor);
    this.options.log.warn(
      { ip: source, last: kind, refused_for_s: Math.ceil(refusedFor.ms / 1000), site: refusedFor.site },
      'SSH source penalized: its connections are refused until the penalty drains (SVC_SSH_SOURCE_PENALTIES)',
    );
  }

  get port(): number {
    return this.listeningPort;
  }

  async listen(): Promise<number> {
    this.listeningPort = await listenOn(this.tcp, this.options.port, this.options.host, 'SSH gateway');
    return this.listeningPort;
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.end();
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.tcp.close(() => resolve()));
  }

  private accept(client: Connection, ip: string, port: number): void {
    const { registry, log, limits } = this.options;
    const admitted = this.tickets.get(`${ip}|${port}`);
    if (!admitted) {
      // Not a socket this gateway admitted (cannot happen: ssh2 only sees injected sockets).
      client.end();
      return;
    }
    const { ticket, ending } = admitted;
    this.connections.add(client);
    let entry: AccessEntry | undefined;
    let closed = false;
    client.once('close', () => (closed = true));

    client.on('authentication', (ctx) => {
      // `none` is how clients ask which methods there are; sshd does not count it either.
      const refuse = (): void => {
        if (ctx.method !== 'none' && ++ending.failedLogins >= limits.maxAuthTries) {
          ctx.reject([], false);
          if (ending.failedLogins === limits.maxAuthTries) {
            log.info({ ip, attempts: ending.failedLogins }, 'SSH connection closed: too many failed logins');
            client.end();
          }
          return;
        }
        ctx.reject(['publickey']);
      };
      const found = registry.lookup(ctx.username);
      if (!found.ok) {
        // The same answer for unknown and stopping instances as for a wrong key: nothing to probe.
        log.info({ user: ctx.username, ip, why: found.reason }, 'SSH login refused');
        return refuse();
      }
      if (ctx.method !== 'publickey') return refuse();
      const key = publicKeyAccepted(found.entry.keys, {
        blob: ctx.key.data,
        ...(ctx.signature ? { signature: ctx.signature, signedData: ctx.blob!, hashAlgo: ctx.hashAlgo } : {}),
      });
      if (!key) return refuse();
      if (ctx.signature) {
        if (!ticket.authenticated(found.entry.instanceId)) {
          log.info({ instance: found.entry.instanceId, ip, max: limits.maxConnectionsPerInstance }, 'SSH login refused: the instance has its fill of connections (SVC_SSH_MAX_CONNECTIONS_PER_INSTANCE)');
          return refuse();
        }
        entry = found.entry;
        log.info({ instance: entry.instanceId, ip, key_fingerprint: key.fingerprint }, 'SSH login');
        // Paced with the instance's other work on the agent (access/instance-pacer.ts): a
        // client logging in and out in a loop waits for its answer.
        void this.pace(entry.instanceId, 'login').then(() => {
          try {
            if (!closed) ctx.accept();
          } catch (err) {
            log.debug({ err, ip }, 'SSH login answered after the connection went');
          }
        });
        return;
      }
      ctx.accept();
    });

    // A client may ask for a new key exchange whenever it likes, and each costs the agent's
    // thread what a login's does (measured: a logged-in ssh2 client re-keying in a loop had
    // about 900 done a second, one core's worth). Real clients re-key once per gigabyte or
    // so (OpenSSH's RekeyLimit), so a connection that asks more often is closed.
    const rekeys = new TokenBucket(REKEYS_PER_SECOND, REKEY_BURST);
    client.on('rekey', () => {
      if (rekeys.take(1) === 0) return;
      log.info({ ip, instance: entry?.instanceId }, 'SSH connection closed: it asked for new keys too often');
      client.end();
    });

    client.on('ready', () => {
      const instance = entry!;
      const sessions = new Set<SessionHandle>();
      let hasBash: Promise<boolean> | undefined;
      let hasShell: Promise<boolean> | undefined;
      const untrack = registry.track(instance.instanceId, (reason) => {
        for (const s of sessions) s.close(reason);
        // Let the sessions' goodbyes reach the client, then hang up.
        setTimeout(() => client.end(), 200).unref();
      });
      client.once('close', untrack);
      let connectionOpen = true;
      client.once('close', () => (connectionOpen = false));
      // An archive stat: an engine call like any other, so it waits its turn.
      const imageHas = (path: string): Promise<boolean> => this.pace(instance.instanceId, 'archive').then(() => hasFile(this.options.docker, instance.containerId, path));

      // Channels this connection holds (sessions and forwards, opening or open).
      let channels = 0;
      const channelRefused = (kind: string): boolean => {
        if (channels < limits.maxChannelsPerConnection) return false;
        log.info({ instance: instance.instanceId, ip, kind, max: limits.maxChannelsPerConnection }, 'SSH channel refused: the connection holds its fill (SVC_SSH_MAX_CHANNELS_PER_CONNECTION)');
        return true;
      };

      client.on('session', (accept, reject) => {
        if (channelRefused('session')) return reject();
        channels++;
        const session = accept();
        session.once('close', () => channels--);
        const handle = handleSession(session, {
          docker: this.options.docker,
          entry: instance,
          log,
          limits,
          instanceOpen: () => registry.lookup(instance.instanceId).ok,
          hasBash: () => (hasBash ??= imageHas('/bin/bash')),
          hasShell: () => (hasShell ??= imageHas('/bin/sh')),
          throttle: () => this.throttleOf(instance.instanceId),
          pace: (kind) => this.pace(instance.instanceId, kind),
          connectionOpen: () => connectionOpen,
          holdEngine: (close) => registry.holdEngine(instance.instanceId, close),
          budgets: { staged: this.stageBudgets.for(instance.instanceId), listings: this.listingBudgets.for(instance.instanceId) },
        });
        sessions.add(handle);
        session.once('close', () => sessions.delete(handle));
      });
      client.on('tcpip', (accept, reject, info) => {
        const target = forwardTarget(info.destIP, registry.current(instance.instanceId)?.containerIp ?? null);
        if (!target) {
          log.info({ instance: instance.instanceId, dest: `${info.destIP}:${info.destPort}` }, 'port forward refused: only the instance itself can be reached');
          return reject();
        }
        if (channelRefused('direct-tcpip')) return reject();
        channels++;
        let released = false;
        const release = (): void => {
          if (!released) channels--;
          released = true;
        };
        const socket = connect(info.destPort, target);
        socket.once('error', () => {
          release();
          reject();
        });
        socket.once('connect', () => {
          socket.removeAllListeners('error');
          const channel: ServerChannel = accept();
          // Flow control both ways: ssh2 gives the client a 2 MiB window per channel and
          // refills it only as the socket takes the data; the channel's writes wait for the
          // client's window. So a forward holds at most a window and a socket buffer.
          socket.pipe(channel).pipe(socket);
          socket.on('error', () => channel.close());
          channel.on('error', () => socket.destroy());
          channel.once('close', () => {
            release();
            socket.destroy();
          });
        });
      });
      // Remote forwarding, agent and X11 forwarding and streamlocal requests are refused.
      client.on('request', (accept, reject) => reject?.());
      client.on('openssh.streamlocal', (accept, reject) => reject());
    });

    client.on('error', (err: Error) => log.debug({ err: err.message, ip }, 'SSH connection error'));
    client.once('close', () => this.connections.delete(client));
  }
}

/** Whether a path exists in the container, asked through the engine (no tool needed). */
async function hasFile(docker: Docker, containerId: string, path: string): Promise<boolean> {
  try {
    await docker.getContainer(containerId).infoArchive({ path });
    return true;
  } catch {
    return false;
  }
}
