// The node's Jupyter proxy: every instance gets a listener of its own, on a port from the
// node's Jupyter range, so each instance's Jupyter is a browser origin of its own (a page
// of tenant A's Jupyter cannot script tenant B's). Paths /<instance id>/... are forwarded
// as they are (the instance's Jupyter serves that base URL) to the container's Jupyter,
// HTTP and WebSocket alike, through http-proxy-3. Nothing passes without the instance's
// token (jupyter-auth.ts); the proxy then speaks for the browser with the token, so
// Jupyter needs no cookies: Jupyter's Set-Cookie headers are dropped (cookies ignore ports,
// so they would reach every instance's origin on the node) and the browser's cookies are
// not forwarded. A stopping instance takes no new requests; its open WebSockets close and
// its port is given back when it is gone. Connections are capped per source and node-wide
// before any byte is read (connection-caps.ts): a stranger needs no token to open one; a
// source whose requests keep being refused is shut out for a while (jupyter-penalties.ts).
// Every byte relayed costs the agent's CPU, so the instances with connections that showed
// their token share the node's Jupyter budget (SVC_JUPYTER_NODE_MBPS) equally, each such
// connection held to its instance's share (access/throttled-socket.ts). A connection
// without a token gets its answer and is closed, so a stranger cannot stream bytes in.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { createProxyServer } from 'http-proxy-3';
import type { Logger } from '@svc/shared';
import type { AccessEntry, AccessRegistry, JupyterTarget } from '../access/access-registry.js';
import { listenOn } from '../access/listen.js';
import { Tally } from '../access/tally.js';
import { ThrottledSocket } from '../access/throttled-socket.js';
import { LinkBudget } from '../access/token-bucket.js';
import { InstancePacer, PACE_BURST_SECONDS } from '../access/instance-pacer.js';
import { authorize, crossOriginRefusal, instanceOfPath, sessionCookie } from './jupyter-auth.js';
import { jupyterOrigin, portOrder, type JupyterPortRange } from './jupyter-origin.js';
import { JupyterPortMemory } from './port-memory.js';
import { JupyterConnectionCaps, type JupyterConnectionLimits } from './connection-caps.js';
import { RefusalLog } from '../access/refusal-log.js';
import { penaltyHolder, SourcePenalties, type PenaltyPolicy } from '../access/source-penalties.js';
import type { JupyterPenaltyKind } from './jupyter-penalties.js';
import type { KernelDropList } from '../access/kernel-drop.js';

export interface JupyterProxyOptions {
  registry: AccessRegistry;
  log: Logger;
  /** Address the listeners bind to. */
  host: string;
  ports: JupyterPortRange;
  /** SVC_JUPYTER_PUBLIC_URL: origin template with `{port}`, or empty. */
  publicUrl: string;
  publicHost: string;
  limits: JupyterConnectionLimits;
  /** Mbit/s each way through the proxy for all instances together, shared equally among those with a connection that showed the token (SVC_JUPYTER_NODE_MBPS). */
  nodeMbps: number;
  /** Requests (and WebSocket opens) a second each instance's port forwards, four seconds' worth at once (SVC_JUPYTER_REQUESTS_PER_SECOND); past it they wait. Default 100; 0: unpaced. */
  requestsPerSecond?: number;
  /** Penalties for sources whose requests are refused (SVC_JUPYTER_SOURCE_PENALTIES); none when absent or null. */
  penalties?: PenaltyPolicy<JupyterPenaltyKind> | null;
  /** Where penalized sources are also dropped by the kernel (access/kernel-drop.ts); absent: refused here only. */
  kernelDrop?: KernelDropList;
  /** The ports instances held, kept across agent restarts; in memory only when absent. */
  memory?: JupyterPortMemory;
}

export const DEFAULT_JUPYTER_REQUESTS_PER_SECOND = 100;

export interface JupyterListener {
  port: number;
  /** The instance's public origin, e.g. http://gpu7.example.com:8917. */
  origin: string;
}

interface Listening extends JupyterListener {
  /** The port's listener: it counts each connection and hands it, throttled, to `server`. */
  tcp: TcpServer;
  server: Server;
}

type Gate =
  | { ok: true; entry: AccessEntry; target: JupyterTarget & { ip: string }; setCookie: boolean }
  | { ok: false; status: number; type: string; message: string };

export class JupyterProxy {
  private readonly listeners = new Map<string, Listening>();
  private readonly opening = new Map<string, Promise<JupyterListener>>();
  private readonly proxy = createProxyServer({ ws: true });
  /** Responses that get the proxy's session cookie (the request came with ?token=). */
  private readonly cookieFor = new WeakMap<IncomingMessage, string>();
  private readonly caps: JupyterConnectionCaps;
  /** Each admitted connection's "it showed a valid token" (its slot is then no stranger's). */
  private readonly tokenShown = new WeakMap<object, () => void>();
  private readonly memory: JupyterPortMemory;
  private readonly budget: LinkBudget;
  /** Each forwarded request costs the agent's one thread (access/instance-pacer.ts). */
  private readonly pacer: InstancePacer;
  /** Per instance, its open connections that showed the token: instances with any share the budget. */
  private readonly tenantsConnected = new Tally();
  private readonly penalties: SourcePenalties<JupyterPenaltyKind> | undefined;
  private readonly refusals: RefusalLog;

  constructor(private readonly options: JupyterProxyOptions) {
    this.caps = new JupyterConnectionCaps(options.limits);
    this.refusals = new RefusalLog(options.log);
    this.penalties = options.penalties ? new SourcePenalties(options.penalties) : undefined;
    this.memory = options.memory ?? new JupyterPortMemory();
    this.budget = new LinkBudget(options.nodeMbps);
    const rate = options.requestsPerSecond ?? DEFAULT_JUPYTER_REQUESTS_PER_SECOND;
    this.pacer = new InstancePacer(rate, rate * PACE_BURST_SECONDS);
    this.proxy.on('proxyRes', (answer, req) => {
      // Jupyter's cookies would be readable and settable from every port of this host.
      delete answer.headers['set-cookie'];
      // No service worker may claim more of the origin than its script's path (see gate()).
      delete answer.headers['service-worker-allowed'];
      const cookie = this.cookieFor.get(req);
      if (cookie) answer.headers['set-cookie'] = [cookie];
    });
    this.proxy.on('proxyReqWs', (proxyReq) => {
      proxyReq.prependListener('upgrade', (answer: IncomingMessage) => {
        delete answer.headers['set-cookie'];
      });
    });
  }

  /** The instance's listener, opened on the first free port of its candidates; repeat calls answer the same one. */
  open(instanceId: string): Promise<JupyterListener> {
    const existing = this.listeners.get(instanceId);
    if (existing) return Promise.resolve({ port: existing.port, origin: existing.origin });
    let pending = this.opening.get(instanceId);
    if (!pending) {
      pending = this.listen(instanceId).finally(() => this.opening.delete(instanceId));
      this.opening.set(instanceId, pending);
    }
    return pending;
  }

  listener(instanceId: string): JupyterListener | undefined {
    const l = this.listeners.get(instanceId);
    return l && { port: l.port, origin: l.origin };
  }

  /** A URL of the instance's listener that this host can reach (for the agent's own checks). */
  localUrl(instanceId: string): string | undefined {
    const l = this.listeners.get(instanceId);
    if (!l) return undefined;
    const host = ['0.0.0.0', '::', ''].includes(this.options.host) ? '127.0.0.1' : this.options.host;
    return `http://${host.includes(':') ? `[${host}]` : host}:${l.port}/${instanceId}/`;
  }

  /** Gives the instance's port back (it is gone, or has no Jupyter); open connections are cut. */
  async close(instanceId: string): Promise<void> {
    await this.shut(instanceId);
    this.keep(() => this.memory.forget(instanceId), instanceId);
  }

  /** The agent stops: every listener closes, and each instance's port is kept for the next start. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.listeners.keys(), ...this.opening.keys()].map((id) => this.shut(id)));
    this.proxy.close();
  }

  private async shut(instanceId: string): Promise<void> {
    await this.opening.get(instanceId)?.catch(() => undefined);
    const l = this.listeners.get(instanceId);
    if (!l) return;
    this.listeners.delete(instanceId);
    l.server.closeAllConnections();
    await new Promise<void>((resolve) => l.tcp.close(() => resolve()));
  }

  private async listen(instanceId: string): Promise<JupyterListener> {
    const { ports, host } = this.options;
    let lastError: Error | undefined;
    for (const candidate of portOrder(ports, instanceId, this.memory.all)) {
      if (candidate !== 0 && [...this.listeners.values()].some((l) => l.port === candidate)) continue;
      const server = this.serverFor(instanceId);
      const tcp = createTcpServer((socket) => this.admit(instanceId, socket, server));
      let port: number;
      try {
        port = await listenOn(tcp, candidate, host, `Jupyter proxy of ${instanceId}`);
      } catch (err) {
        lastError = err as Error;
        continue;
      }
      const listening: Listening = { tcp, server, port, origin: jupyterOrigin(this.options.publicUrl, this.options.publicHost, port) };
      this.listeners.set(instanceId, listening);
      this.keep(() => this.memory.remember(instanceId, port), instanceId);
      return { port, origin: listening.origin };
    }
    const range = ports.first === 0 ? 'any port' : `ports ${ports.first}-${ports.first + ports.count - 1}`;
    throw new Error(`no free Jupyter port on this node (${range}; SVC_JUPYTER_PORT, SVC_JUPYTER_PORT_COUNT): ${lastError?.message ?? 'all are taken by other instances'}`);
  }

  /** A port memory that cannot be written costs at most a moved URL after a restart: logged, not thrown. */
  private keep(change: () => void, instanceId: string): void {
    try {
      change();
    } catch (err) {
      this.options.log.warn({ err, instance: instanceId }, 'could not save the Jupyter ports; an agent restart may move this instance to another port');
    }
  }

  private serverFor(instanceId: string): Server {
    const server = createServer((req, res) => this.forward(instanceId, req, res));
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.tunnel(instanceId, req, socket as Socket, head));
    server.on('clientError', (_err, socket) => socket.destroy());
    return server;
  }

  /**
   * Counts a new connection on any instance's port; closes it at once when a cap says no,
   * or later when its slot goes to a newcomer before it showed a token. An admitted one
   * goes to the instance's HTTP server; once it shows the token, it is held to the
   * instance's share of the budget, and the instance counts among those sharing it.
   */
  private admit(instanceId: string, socket: Socket, server: Server): void {
    const source = socket.remoteAddress ?? 'unknown';
    // A penalized source is closed before a byte is read: no parse, no answer.
    const penalized = this.penalties?.refusedFor(source);
    if (penalized) {
      this.refusals.note(source, `${penaltyHolder(penalized)} penalized ${Math.ceil(penalized.ms / 1000)} s more for refused requests (SVC_JUPYTER_SOURCE_PENALTIES)`, 'Jupyter connection refused');
      this.options.kernelDrop?.keep(source, penalized);
      socket.destroy();
      return;
    }
    const admission = this.caps.admit(source, () => {
      this.options.log.debug({ ip: source }, 'Jupyter connection without a token closed for a newcomer (SVC_JUPYTER_MAX_CONNECTIONS)');
      socket.destroy();
    });
    if (!admission.ok) {
      this.refusals.note(source, admission.reason, 'Jupyter connection refused');
      socket.destroy();
      return;
    }
    let shown = false;
    socket.once('close', () => {
      admission.release();
      if (shown) this.tenantsConnected.remove(instanceId);
    });
    socket.on('error', () => undefined);
    const throttled = new ThrottledSocket(socket, () => (shown ? this.linkOf(instanceId) : undefined));
    this.tokenShown.set(throttled, () => {
      if (shown) return;
      shown = true;
      this.tenantsConnected.add(instanceId);
      admission.authenticated();
    });
    server.emit('connection', throttled);
  }

  /** A request refused for want of the token or a served path costs its source (jupyter-penalties.ts). */
  private penalize(req: IncomingMessage, gate: { status: number }): void {
    if (gate.status !== 401 && gate.status !== 404) return;
    const source = req.socket.remoteAddress ?? 'unknown';
    const refusedFor = this.penalties?.penalize(source, 'refused');
    if (!refusedFor) return;
    this.options.kernelDrop?.drop(source, refusedFor);
    this.options.log.warn(
      { ip: source, refused_for_s: Math.ceil(refusedFor.ms / 1000), site: refusedFor.site },
      'Jupyter source penalized: its connections are refused until the penalty drains (SVC_JUPYTER_SOURCE_PENALTIES)',
    );
  }

  /** The instance's buckets: its bandwidth, or its equal share of the budget when less. */
  private linkOf(instanceId: string) {
    const entry = this.options.registry.current(instanceId);
    return entry && this.budget.linkOf(entry, entry.networkMbps, this.tenantsConnected.size);
  }

  private gate(instanceId: string, req: IncomingMessage): Gate {
    const url = req.url ?? '/';
    if (instanceOfPath(url) !== instanceId) {
      return { ok: false, status: 404, type: 'not_found', message: `this port serves instance ${instanceId}'s Jupyter at /${instanceId}/; the instance read has the whole URL` };
    }
    // A port, and so an origin, passes to another instance once this one is gone, and a
    // service worker registered on it would outlive the instance and answer the next one's
    // pages (its ?token= URL included). Registering one fetches its script with this header.
    if (header(req, 'service-worker') !== undefined) {
      return { ok: false, status: 403, type: 'forbidden', message: "service workers are not allowed: this origin serves another instance's Jupyter after this one" };
    }
    const found = this.options.registry.lookup(instanceId);
    if (!found.ok) {
      return found.reason === 'draining'
        ? { ok: false, status: 503, type: 'instance_stopping', message: `instance ${instanceId} is stopping and takes no new connections` }
        : { ok: false, status: 404, type: 'not_found', message: `no instance ${instanceId} runs on this node` };
    }
    const { entry } = found;
    const auth = authorize(instanceId, entry.jupyterToken, { url, authorization: req.headers.authorization, cookie: req.headers.cookie });
    if (!auth.ok) return { ok: false, status: 401, type: 'unauthorized', message: `instance ${instanceId}'s Jupyter needs its token: ?token=<token> or an "Authorization: token <token>" header` };
    const origin = this.listeners.get(instanceId)?.origin ?? '';
    const refusal = crossOriginRefusal(auth.via, { origin: req.headers.origin, host: req.headers.host, secFetchSite: header(req, 'sec-fetch-site') }, origin);
    if (refusal) return { ok: false, status: 403, type: 'forbidden', message: refusal };
    if (!entry.jupyter || !entry.containerIp) {
      return { ok: false, status: 503, type: 'jupyter_unavailable', message: `instance ${instanceId} has no Jupyter: ${entry.jupyterUnavailableReason ?? 'it is still being set up'}` };
    }
    return { ok: true, entry, target: { ...entry.jupyter, ip: entry.containerIp }, setCookie: auth.via === 'query' };
  }

  /** What goes upstream: the token instead of the browser's cookies (which may hold other instances' and sites'). */
  private speakForBrowser(req: IncomingMessage, entry: AccessEntry): void {
    delete req.headers.cookie;
    req.headers.authorization = `token ${entry.jupyterToken}`;
  }

  private forward(instanceId: string, req: IncomingMessage, res: ServerResponse): void {
    const gate = this.gate(instanceId, req);
    if (!gate.ok) {
      this.penalize(req, gate);
      return refuse(res, gate);
    }
    this.tokenShown.get(req.socket)?.();
    const wait = this.pacer.delayFor(instanceId);
    if (wait > 0) setTimeout(() => this.relay(instanceId, gate, req, res), wait);
    else this.relay(instanceId, gate, req, res);
  }

  private relay(instanceId: string, gate: Gate & { ok: true }, req: IncomingMessage, res: ServerResponse): void {
    if (req.socket.destroyed) return; // the client left while the request waited its turn
    if (gate.setCookie) this.cookieFor.set(req, sessionCookie(instanceId, gate.entry.jupyterToken, this.options.publicUrl.startsWith('https:')));
    this.speakForBrowser(req, gate.entry);
    this.proxy.web(req, res, { target: { host: gate.target.ip, port: gate.target.port } }, (err) => {
      if (!res.headersSent) refuse(res, { status: 502, type: 'jupyter_unreachable', message: `instance ${instanceId}'s Jupyter does not answer: ${err.message}` });
      else res.destroy();
    });
  }

  private tunnel(instanceId: string, req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const gate = this.gate(instanceId, req);
    if (!gate.ok) {
      this.penalize(req, gate);
      socket.end(rawAnswer(gate));
      return;
    }
    this.tokenShown.get(socket)?.();
    const wait = this.pacer.delayFor(instanceId);
    if (wait > 0) setTimeout(() => this.openTunnel(instanceId, gate, req, socket, head), wait);
    else this.openTunnel(instanceId, gate, req, socket, head);
  }

  private openTunnel(instanceId: string, gate: Gate & { ok: true }, req: IncomingMessage, socket: Socket, head: Buffer): void {
    if (socket.destroyed) return;
    this.speakForBrowser(req, gate.entry);
    const untrack = this.options.registry.track(instanceId, () => socket.destroy());
    socket.once('close', untrack);
    this.proxy.ws(req, socket, head, { target: { host: gate.target.ip, port: gate.target.port } }, (err) => {
      this.options.log.debug({ err: err.message, instance: instanceId }, 'Jupyter WebSocket upstream failed');
      // Before the upgrade the client gets an answer; after it, the socket just closes.
      if (socket.bytesWritten === 0 && !socket.destroyed) {
        socket.end(rawAnswer({ status: 502, type: 'jupyter_unreachable', message: `instance ${instanceId}'s Jupyter does not answer: ${err.message}` }));
      } else {
        socket.destroy();
      }
    });
  }
}

function header(req: IncomingMessage, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** The answer, then the connection closes: an unread request body is not read on (a stranger's, unbounded). */
function refuse(res: ServerResponse, gate: { status: number; type: string; message: string }): void {
  const body = JSON.stringify({ error: { type: gate.type, message: gate.message } });
  res.writeHead(gate.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), connection: 'close' });
  res.end(body);
}

const REASONS: Record<number, string> = { 401: 'Unauthorized', 403: 'Forbidden', 404: 'Not Found', 502: 'Bad Gateway', 503: 'Service Unavailable' };

/** An answer written on a socket that was asking for an upgrade. */
function rawAnswer(gate: { status: number; type: string; message: string }): string {
  const body = JSON.stringify({ error: { type: gate.type, message: gate.message } });
  return `HTTP/1.1 ${gate.status} ${REASONS[gate.status] ?? 'Error'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`;
}
