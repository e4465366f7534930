// The node's SSH gateway (ssh2 as the server): one port for every instance on the node.
// The user name is the instance id; only the public keys given when the instance was
// created authenticate. Sessions, SFTP and `ssh -L` forwarding are carried out inside the
// container (ssh-session.ts), so images need no sshd. A stopping instance takes no new
// connections; a gone one has its connections closed.
import { connect } from 'node:net';
import { listenOn } from '../access/listen.js';
import type Docker from 'dockerode';
import ssh2, { type Connection, type ServerChannel } from 'ssh2';
import type { Logger } from '@svc/shared';
import type { AccessEntry, AccessRegistry } from '../access/access-registry.js';
import { publicKeyAccepted } from './authorized-keys.js';
import type { HostKey } from './host-key.js';
import { forwardTarget } from './session-request.js';
import { handleSession, type SessionHandle } from './ssh-session.js';

const { Server } = ssh2;

export interface SshGatewayOptions {
  registry: AccessRegistry;
  docker: Docker;
  hostKey: HostKey;
  log: Logger;
  host: string;
  /** 0 picks a free port. */
  port: number;
}

/** Dead peers are noticed after ~45 s of silence (15 s keepalives, 3 unanswered). */
const KEEPALIVE_INTERVAL_MS = 15_000;
const KEEPALIVE_COUNT_MAX = 3;
const AUTH_ATTEMPTS = 10;

export class SshGateway {
  private readonly server: ssh2.Server;
  private readonly connections = new Set<Connection>();
  private listeningPort = 0;

  constructor(private readonly options: SshGatewayOptions) {
    this.server = new Server(
      {
        hostKeys: [options.hostKey.privateKey],
        ident: 'svc-gateway',
        keepaliveInterval: KEEPALIVE_INTERVAL_MS,
        keepaliveCountMax: KEEPALIVE_COUNT_MAX,
      },
      (client, info) => this.accept(client, info.ip),
    );
    this.server.on('error', (err: Error) => options.log.error({ err }, 'SSH gateway error'));
  }

  get port(): number {
    return this.listeningPort;
  }

  async listen(): Promise<number> {
    this.listeningPort = await listenOn(this.server, this.options.port, this.options.host, 'SSH gateway');
    return this.listeningPort;
  }

  async close(): Promise<void> {
    for (const c of this.connections) c.end();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Connection, ip: string): void {
    const { registry, log } = this.options;
    this.connections.add(client);
    let attempts = 0;
    let entry: AccessEntry | undefined;

    client.on('authentication', (ctx) => {
      if (++attempts > AUTH_ATTEMPTS) return ctx.reject([], false);
      const found = registry.lookup(ctx.username);
      if (!found.ok) {
        // The same answer for unknown and stopping instances as for a wrong key: nothing to probe.
        log.info({ user: ctx.username, ip, why: found.reason }, 'SSH login refused');
        return ctx.reject(['publickey']);
      }
      if (ctx.method !== 'publickey') return ctx.reject(['publickey']);
      const key = publicKeyAccepted(found.entry.keys, {
        blob: ctx.key.data,
        ...(ctx.signature ? { signature: ctx.signature, signedData: ctx.blob!, hashAlgo: ctx.hashAlgo } : {}),
      });
      if (!key) return ctx.reject(['publickey']);
      if (ctx.signature) {
        entry = found.entry;
        log.info({ instance: entry.instanceId, ip, key_fingerprint: key.fingerprint }, 'SSH login');
      }
      ctx.accept();
    });

    client.on('ready', () => {
      const instance = entry!;
      const sessions = new Set<SessionHandle>();
      let hasBash: Promise<boolean> | undefined;
      const untrack = registry.track(instance.instanceId, (reason) => {
        for (const s of sessions) s.close(reason);
        // Let the sessions' goodbyes reach the client, then hang up.
        setTimeout(() => client.end(), 200).unref();
      });
      client.once('close', untrack);

      client.on('session', (accept) => {
        const handle = handleSession(accept(), {
          docker: this.options.docker,
          entry: instance,
          log,
          instanceOpen: () => registry.lookup(instance.instanceId).ok,
          hasBash: () => (hasBash ??= hasFile(this.options.docker, instance.containerId, '/bin/bash')),
        });
        sessions.add(handle);
      });
      client.on('tcpip', (accept, reject, info) => {
        const target = forwardTarget(info.destIP, registry.current(instance.instanceId)?.containerIp ?? null);
        if (!target) {
          log.info({ instance: instance.instanceId, dest: `${info.destIP}:${info.destPort}` }, 'port forward refused: only the instance itself can be reached');
          return reject();
        }
        const socket = connect(info.destPort, target);
        socket.once('error', () => reject());
        socket.once('connect', () => {
          socket.removeAllListeners('error');
          const channel: ServerChannel = accept();
          socket.pipe(channel).pipe(socket);
          socket.on('error', () => channel.close());
          channel.on('error', () => socket.destroy());
          channel.once('close', () => socket.destroy());
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
