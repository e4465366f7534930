// The operators' listener: GET /metrics with the dcgm-exporter series of every reachable
// node's GPUs, and GET /status, the fleet status page (pools, a square per GPU coloured by
// health, the XID timeline, instances and replicas per node) that follows the fleet live.
// A listener of its own, never on the public API port: customers must not see nodes, GPUs
// or other tenants' hardware, and it has no authentication, so it belongs on loopback or a
// management network (SVC_OPERATOR_METRICS_HOST / SVC_OPERATOR_METRICS_PORT; port 0
// leaves it off). The pages also check Host, against DNS rebinding (status/host-check.ts).
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { systemClock, type Clock, type Logger } from '@svc/shared';
import type { NodeStore } from '../store/node-store.js';
import type { InstanceStore } from '../store/instance-store.js';
import type { DesiredReplica } from '../replicas/desired.js';
import type { FleetSource } from '../status/fleet-read.js';
import { operatorPages } from '../status/operator-pages.js';
import { renderDcgmMetrics, type DcgmNodeInput, type GpuHolder } from './dcgm-metrics.js';

export interface OperatorMetricsServer {
  /** GET /metrics. */
  url: string;
  /** GET /status, the fleet status page. */
  statusUrl: string;
  close(): Promise<void>;
}

/**
 * The nodes worth exporting: reachable and not forgotten. A silent node's last values would
 * lie; its series go stale instead. Four reads per scrape whatever the fleet's size (nodes,
 * GPUs, last XIDs, live instances): the `instance` and `org` labels come from the live
 * instances' GPU lists, not from a read per GPU.
 */
export async function collectDcgmInput(
  store: Pick<NodeStore, 'listNodes' | 'listGpus' | 'lastXidByGpu'>,
  instances: Pick<InstanceStore, 'listActive'>,
): Promise<DcgmNodeInput[]> {
  const [nodes, gpus, lastXid, active] = await Promise.all([store.listNodes(), store.listGpus(), store.lastXidByGpu(), instances.listActive()]);
  const byNode = new Map<string, DcgmNodeInput['gpus']>();
  for (const gpu of gpus) byNode.set(gpu.nodeId, [...(byNode.get(gpu.nodeId) ?? []), gpu]);
  const holders = new Map<string, GpuHolder>();
  for (const instance of active) for (const uuid of instance.gpuUuids) holders.set(uuid, { instanceId: instance.id, orgId: instance.orgId });
  return nodes
    .filter((n) => n.status === 'ready' && !n.forgottenAt)
    .map((node) => ({ node, gpus: byNode.get(node.id) ?? [], lastXid, holders }));
}

function sendError(res: ServerResponse, status: number, type: string, message: string, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers });
  res.end(JSON.stringify({ error: { type, message } }));
}

export async function startOperatorMetricsServer(options: {
  host: string;
  port: number;
  store: Pick<NodeStore, 'listNodes' | 'listGpus' | 'lastXidByGpu'>;
  /** What the status page reads: nodes, GPUs, timelines, instances, replicas, orgs. */
  fleet: FleetSource;
  desired: readonly DesiredReplica[];
  /** How often an open status page refreshes. */
  refreshMs: number;
  /** Host names the pages answer to besides IP addresses and localhost. */
  hostnames: readonly string[];
  clock?: Clock;
  log: Pick<Logger, 'info' | 'error'>;
}): Promise<OperatorMetricsServer> {
  const pages = operatorPages({ ...options, clock: options.clock ?? systemClock });

  const metrics = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const text = await renderDcgmMetrics(await collectDcgmInput(options.store, options.fleet.instances));
    res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' });
    res.end(req.method === 'HEAD' ? undefined : text);
  };

  const page = async (path: string, req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const answer = await pages.answer(path, req.headers);
    res.writeHead(answer.status, answer.headers);
    res.end(req.method === 'HEAD' ? undefined : answer.body);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const path = (req.url ?? '/').split('?')[0]!;
    const isPage = pages.paths.has(path);
    if (path !== '/metrics' && !isPage) return sendError(res, 404, 'not_found', `no route ${path}; this listener serves GET /metrics and GET /status`);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      return sendError(res, 405, 'method_not_allowed', `${req.method} ${path} is not allowed; use GET`, { allow: 'GET, HEAD' });
    }
    try {
      await (isPage ? page(path, req, res) : metrics(req, res));
    } catch (err) {
      options.log.error({ err }, 'operators\' listener: could not read the fleet');
      sendError(res, 503, 'service_unavailable', 'could not read the fleet from the store; retry');
    }
  };
  const server: Server = createServer((req, res) => void handle(req, res));
  // Scrapers and pages send no body; a slow or idle client is not held long.
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const { address, port } = server.address() as AddressInfo;
  const host = address.includes(':') ? `[${address}]` : address;
  const url = `http://${host}:${port}/metrics`;
  const statusUrl = `http://${host}:${port}/status`;
  options.log.info({ url, status_url: statusUrl }, "operators' listener (GPU metrics, status page) listening");
  return {
    url,
    statusUrl,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
