// The node's Jupyter proxy: one HTTP port for every instance, paths /<instance id>/...
// forwarded as they are (the instance's Jupyter serves that base URL) to the container's
// Jupyter over the Docker network, HTTP and WebSocket alike. Nothing passes without the
// instance's token (jupyter-auth.ts). A stopping instance takes no new requests; its open
// WebSockets close when it is gone.
import { createServer, request, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOn } from '../access/listen.js';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { Logger } from '@svc/shared';
import type { AccessEntry, AccessRegistry, JupyterTarget } from '../access/access-registry.js';
import { authorize, instanceOfPath, sessionCookie } from './jupyter-auth.js';

export interface JupyterProxyOptions {
  registry: AccessRegistry;
  log: Logger;
  host: string;
  /** 0 picks a free port. */
  port: number;
  /** Mark the cookie Secure (the public URL is https). */
  secureCookies: boolean;
}

type Gate =
  | { ok: true; entry: AccessEntry; target: JupyterTarget & { ip: string }; setCookie: boolean }
  | { ok: false; status: number; type: string; message: string };

// Hop-by-hop headers are the proxy's own business (RFC 9110 7.6.1).
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'upgrade']);

export class JupyterProxy {
  private readonly server: Server;
  private listeningPort = 0;

  constructor(private readonly options: JupyterProxyOptions) {
    this.server = createServer((req, res) => this.forward(req, res));
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.tunnel(req, socket as Socket, head));
    this.server.on('clientError', (_err, socket) => socket.destroy());
  }

  get port(): number {
    return this.listeningPort;
  }

  async listen(): Promise<number> {
    this.listeningPort = await listenOn(this.server, this.options.port, this.options.host, 'Jupyter proxy');
    return this.listeningPort;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private gate(req: IncomingMessage): Gate {
    const url = req.url ?? '/';
    const instanceId = instanceOfPath(url);
    if (!instanceId) return { ok: false, status: 404, type: 'not_found', message: 'Jupyter URLs look like /<instance id>/?token=<token>; the instance read has the whole URL' };
    const found = this.options.registry.lookup(instanceId);
    if (!found.ok) {
      return found.reason === 'draining'
        ? { ok: false, status: 503, type: 'instance_stopping', message: `instance ${instanceId} is stopping and takes no new connections` }
        : { ok: false, status: 404, type: 'not_found', message: `no instance ${instanceId} runs on this node` };
    }
    const { entry } = found;
    const auth = authorize(instanceId, entry.jupyterToken, { url, authorization: req.headers.authorization, cookie: req.headers.cookie });
    if (!auth.ok) return { ok: false, status: 401, type: 'unauthorized', message: `instance ${instanceId}'s Jupyter needs its token: ?token=<token> or an "Authorization: token <token>" header` };
    if (!entry.jupyter || !entry.containerIp) {
      return { ok: false, status: 503, type: 'jupyter_unavailable', message: `instance ${instanceId} has no Jupyter: ${entry.jupyterUnavailableReason ?? 'it is still being set up'}` };
    }
    return { ok: true, entry, target: { ...entry.jupyter, ip: entry.containerIp }, setCookie: auth.via === 'query' };
  }

  private forward(req: IncomingMessage, res: ServerResponse): void {
    const gate = this.gate(req);
    if (!gate.ok) return refuse(res, gate);
    const headers = { ...req.headers };
    for (const h of HOP_BY_HOP) delete headers[h];
    const upstream = request({ host: gate.target.ip, port: gate.target.port, method: req.method, path: req.url, headers }, (answer) => {
      const out: Record<string, string | string[] | undefined> = { ...answer.headers };
      for (const h of HOP_BY_HOP) delete out[h];
      if (gate.setCookie) {
        const existing = answer.headers['set-cookie'] ?? [];
        out['set-cookie'] = [...existing, sessionCookie(gate.entry.instanceId, gate.entry.jupyterToken, this.options.secureCookies)];
      }
      res.writeHead(answer.statusCode ?? 502, out);
      answer.pipe(res);
    });
    upstream.on('error', (err) => {
      if (!res.headersSent) {
        refuse(res, { status: 502, type: 'jupyter_unreachable', message: `instance ${gate.entry.instanceId}'s Jupyter does not answer: ${err.message}` });
      } else {
        res.destroy();
      }
    });
    res.on('close', () => {
      if (!res.writableFinished) upstream.destroy();
    });
    req.pipe(upstream);
  }

  private tunnel(req: IncomingMessage, socket: Socket, head: Buffer): void {
    socket.on('error', () => socket.destroy());
    const gate = this.gate(req);
    if (!gate.ok) {
      const body = JSON.stringify({ error: { type: gate.type, message: gate.message } });
      socket.end(`HTTP/1.1 ${gate.status} ${gate.status === 401 ? 'Unauthorized' : gate.status === 404 ? 'Not Found' : 'Service Unavailable'}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      return;
    }
    const upstream = connect(gate.target.port, gate.target.ip);
    let connected = false;
    const untrack = this.options.registry.track(gate.entry.instanceId, () => {
      upstream.destroy();
      socket.destroy();
    });
    const done = (): void => {
      untrack();
      upstream.destroy();
      // Before the upstream connected the client gets an answer (below), which end() flushes.
      if (connected) socket.destroy();
    };
    upstream.once('connect', () => {
      connected = true;
      const lines = [`${req.method} ${req.url} HTTP/${req.httpVersion}`];
      for (let i = 0; i < req.rawHeaders.length; i += 2) lines.push(`${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}`);
      upstream.write(`${lines.join('\r\n')}\r\n\r\n`);
      if (head.length > 0) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    upstream.on('error', (err) => {
      this.options.log.debug({ err: err.message, instance: gate.entry.instanceId }, 'Jupyter WebSocket upstream failed');
      if (!connected) {
        const body = JSON.stringify({ error: { type: 'jupyter_unreachable', message: `instance ${gate.entry.instanceId}'s Jupyter does not answer: ${err.message}` } });
        socket.end(`HTTP/1.1 502 Bad Gateway\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
      }
      done();
    });
    upstream.once('close', done);
    socket.once('close', done);
  }
}

function refuse(res: ServerResponse, gate: { status: number; type: string; message: string }): void {
  const body = JSON.stringify({ error: { type: gate.type, message: gate.message } });
  res.writeHead(gate.status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
  res.end(body);
}
