// The proxy dockerd fetches images through (HTTP_PROXY and HTTPS_PROXY in dockerd's own
// environment): replicas' images, since instances' come from the registry front
// (registry-front.ts), whose own connections checkDestination below checks as well. Checking a registry's name before a pull (image-registry.ts) cannot see
// what dockerd connects to next: a name that resolves elsewhere a moment later, the URL a
// registry names for its tokens (`WWW-Authenticate: Bearer realm=...`), a layer download
// redirected anywhere. Each of those is a request from the host, into the provider's own
// network or to the cloud metadata service, whose credentials dockerd would send on to the
// registry as a token. Through this proxy every connection dockerd makes is checked when
// it is made: the name is resolved here, every address it has must be public (or the
// destination listed in SVC_INSTANCE_PRIVATE_REGISTRIES, or in SVC_REPLICA_REGISTRIES while
// a replica pulls from one), and the connection goes to the address that was checked, so a
// second answer from DNS changes nothing.
//
// CONNECT tunnels (HTTPS) are relayed as bytes; plain-HTTP requests (registries dockerd
// reaches over http, token services on http URLs) are forwarded by http-proxy-3. Neither
// follows a redirect itself: dockerd sends the next request through here again.
// dockerd never sends loopback destinations through a proxy (Go's rule), which is why
// image-registry.ts still refuses those by name.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect, isIPv6, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '@svc/shared';
import { listenOn } from '../access/listen.js';
import { addressesOf, nonPublicKind, type RegistryPolicy } from './image-registry.js';

/** How long a connection to a registry may take to open. */
const CONNECT_TIMEOUT_MS = 30_000;

export interface PullProxyOptions {
  /** 0 picks a free port. Always on loopback: dockerd runs on the same host. */
  port: number;
  policy: RegistryPolicy;
  log: Logger;
}

export interface PullProxy {
  port: number;
  /** The URL dockerd's HTTP_PROXY and HTTPS_PROXY should hold. */
  url: string;
  close(): Promise<void>;
}

/**
 * A destination dockerd asked for: where it may go (every address the name has, each
 * checked, in the resolver's order, tried in turn as Go's dialer does), or why not (for the
 * status line dockerd quotes).
 */
export type Destination = { addresses: string[]; port: number } | Refusal;
interface Refusal {
  refused: string;
  status: 403 | 502;
}

/** Whether `host:port` (host without brackets) may be reached for a pull, and at which address. */
export async function checkDestination(host: string, port: number, policy: RegistryPolicy): Promise<Destination> {
  const name = host.toLowerCase();
  const withPort = isIPv6(name) ? `[${name}]:${port}` : `${name}:${port}`;
  const names = (entries: readonly string[] | undefined) => (entries ?? []).some((entry) => entry === name || entry === withPort || entry === `[${name}]`);
  // A registry of the node's own images, only while a replica pulls from one (image-registry.ts).
  const listed = names(policy.allowed) || (names(policy.replicaOnly) && policy.replicaPulls?.open === true);
  const addresses = await addressesOf(name, policy, listed);
  if (addresses.length === 0) return { refused: `${host} does not resolve`, status: 502 };
  if (!listed) {
    const kind = nonPublicKind(addresses);
    if (kind !== null) return { refused: `${host} is not on a public address (${kind})`, status: 403 };
  }
  return { addresses, port };
}

/**
 * Connects to the first of `addresses` that answers, `connectOne` making each attempt with
 * its share of `timeoutMs` (at least 2 s): a registry with one address down, or an IPv6
 * address the host has no route to, is reached at the next, as dockerd itself would.
 */
export function connectFirst<T>(
  addresses: readonly string[],
  timeoutMs: number,
  connectOne: (address: string, timeoutMs: number, done: (err: Error | null, connection: T | null) => void) => void,
  done: (err: Error | null, connection: T | null) => void,
): void {
  const each = Math.max(2_000, Math.floor(timeoutMs / addresses.length));
  const attempt = (index: number): void =>
    connectOne(addresses[index]!, each, (err, connection) => {
      if (!err) return done(null, connection);
      if (index + 1 < addresses.length) return attempt(index + 1);
      done(err, null);
    });
  attempt(0);
}

/** `host:port` of a CONNECT request, brackets taken off an IPv6 host; null when malformed. */
export function parseAuthority(authority: string): { host: string; port: number } | null {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^\s:/[\]@]+)):(\d{1,5})$/.exec(authority);
  if (!match) return null;
  const port = Number(match[3]);
  if (port < 1 || port > 65535) return null;
  return { host: (match[1] ?? match[2])!, port };
}

export async function startPullProxy(options: PullProxyOptions): Promise<PullProxy> {
  const { policy, log } = options;
  const forwarder = createProxyServer({ xfwd: false, changeOrigin: false, proxyTimeout: CONNECT_TIMEOUT_MS });
  forwarder.on('error', (err, _req, res) => {
    log.info({ err: err.message }, 'pull proxy: a forwarded request failed');
    if (res && 'writeHead' in res && !res.headersSent) res.writeHead(502, 'Bad Gateway').end();
    else res?.destroy();
  });
  /** The status line's reason: dockerd quotes it in the pull's error, which the tenant reads. */
  const refusalReason = (what: string, refusal: Refusal): string => {
    log.warn({ destination: what, reason: refusal.refused }, 'pull proxy: refused a connection dockerd asked for');
    return `Refused by the node: ${refusal.refused.replace(/[^\x20-\x7e]/g, '?')}`;
  };

  const onRequest = (req: IncomingMessage, res: ServerResponse): void => {
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      res.writeHead(400, 'Not a proxy request').end();
      return;
    }
    if (url.protocol !== 'http:') {
      res.writeHead(400, 'Only http URLs are forwarded').end();
      return;
    }
    const host = url.hostname.replace(/^\[|\]$/g, '');
    void checkDestination(host, Number(url.port || 80), policy).then((destination) => {
      if ('refused' in destination) {
        // In the registry API's error form: dockerd reads a refused request's body as one.
        const reason = refusalReason(url.host, destination);
        res.writeHead(destination.status, reason, { 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code: 'DENIED', message: reason }] }));
        return;
      }
      // http-proxy-3 takes one target: plain HTTP goes to the first address (registries and token services are HTTPS, through tunnels).
      const address = destination.addresses[0]!;
      const target = `http://${isIPv6(address) ? `[${address}]` : address}:${destination.port}`;
      // The Host header stays the one dockerd sent; only the address is ours.
      forwarder.web(req, res, { target });
    });
  };

  // A CONNECT's socket leaves the HTTP server's hands, so close() ends these itself.
  const tunnels = new Set<Duplex>();
  const onConnect = (req: IncomingMessage, client: Duplex, head: Buffer): void => {
    tunnels.add(client);
    client.once('close', () => tunnels.delete(client));
    client.on('error', () => client.destroy());
    const authority = parseAuthority(req.url ?? '');
    if (!authority) {
      client.end('HTTP/1.1 400 Not a host and port\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    void checkDestination(authority.host, authority.port, policy).then((destination) => {
      if ('refused' in destination) {
        client.end(`HTTP/1.1 ${destination.status} ${refusalReason(req.url!, destination)}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
        return;
      }
      tunnel(client, head, destination);
    });
  };

  const server: Server = createServer(onRequest);
  server.on('connect', onConnect);
  server.on('clientError', (_err, socket) => socket.destroy());
  const port = await listenOn(server, options.port, '127.0.0.1', 'pull proxy');
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
        for (const client of tunnels) client.destroy();
        forwarder.close();
      }),
  };
}

function tunnel(client: Duplex, head: Buffer, destination: { addresses: string[]; port: number }): void {
  const connectOne = (address: string, timeout: number, done: (err: Error | null, socket: Socket | null) => void): void => {
    const socket: Socket = connect({ host: address, port: destination.port, timeout });
    const failed = (err?: Error): void => {
      socket.destroy();
      done(err ?? new Error(`connecting to ${address} timed out`), null);
    };
    socket.once('timeout', failed);
    socket.once('error', failed);
    socket.once('connect', () => {
      socket.off('timeout', failed).off('error', failed).setTimeout(0);
      done(null, socket);
    });
  };
  connectFirst(destination.addresses, CONNECT_TIMEOUT_MS, connectOne, (err, upstream) => {
    if (err || !upstream) {
      if (!client.destroyed) client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n');
      return;
    }
    // dockerd gave up while it connected.
    if (client.destroyed) return void upstream.destroy();
    client.once('close', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    upstream.once('close', () => client.destroy());
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) upstream.write(head);
    client.pipe(upstream).pipe(client);
  });
}

/** What `docker info` says of dockerd's proxy (Docker's names; credentials in the URLs come masked). */
export interface DockerdProxyInfo {
  HttpProxy?: string;
  HttpsProxy?: string;
  NoProxy?: string;
}

/** Why dockerd's pulls do not all pass through the pull proxy on `port`; empty when they do. */
export function dockerdProxyProblems(info: DockerdProxyInfo, port: number): string[] {
  const ours = (value: string | undefined): boolean => {
    try {
      const url = new URL(value ?? '');
      return url.protocol === 'http:' && (url.hostname === '127.0.0.1' || url.hostname === 'localhost') && Number(url.port) === port;
    } catch {
      return false;
    }
  };
  const problems: string[] = [];
  const missing = (['HttpProxy', 'HttpsProxy'] as const).filter((field) => !ours(info[field]));
  if (missing.length > 0) {
    const names = missing.map((field) => (field === 'HttpProxy' ? 'HTTP_PROXY' : 'HTTPS_PROXY')).join(' and ');
    problems.push(`dockerd's ${names} ${missing.length > 1 ? 'are' : 'is'} not the agent's pull proxy (http://127.0.0.1:${port}): a registry dockerd pulls a replica's image from can send dockerd anywhere the host reaches, the metadata service included`);
  }
  if (info.NoProxy?.trim()) {
    problems.push(`dockerd's NO_PROXY (${info.NoProxy.trim()}) lets a registry send dockerd there unchecked; list private registries in SVC_INSTANCE_PRIVATE_REGISTRIES instead`);
  }
  return problems;
}

