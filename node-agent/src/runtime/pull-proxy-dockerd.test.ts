// The pull proxy with a real dockerd sending its pulls through it (HTTP_PROXY and
// HTTPS_PROXY in its environment, as docs/node-agent.md has the operator set them), against
// registries a tenant could run. dockerd never sends a loopback destination through a
// proxy, so the registries here listen on a test bridge's address, which is on this host
// but not loopback; the "metadata service" listens there too.
import { createHash } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { BUSYBOX_IMAGE, dockerAvailable, REGISTRY } from '../../../test/support/images.js';
import { makeTestBridge, startSecondDockerd, type SecondDockerd, type TestBridge } from '../../../test/support/second-dockerd.js';
import { startPullProxy, type PullProxy } from './pull-proxy.js';
import { ReplicaPullWindow } from './image-registry.js';

const shared = new Docker();
const sha256 = (data: string): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

interface Listening<T> {
  server: T;
  port: number;
}

async function listen<T extends Server | HttpServer>(server: T, host: string): Promise<Listening<T>> {
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(0, host, resolve));
  return { server, port: (server.address() as AddressInfo).port };
}

/** The error a pull ends with, or null when it succeeds. */
async function pullError(docker: Docker, image: string): Promise<string | null> {
  try {
    const stream = await docker.pull(image);
    await new Promise<void>((resolve, reject) =>
      docker.modem.followProgress(stream, (err: Error | null, events: Array<{ error?: string }>) => {
        // A failure after the pull started comes as an event in the stream, not as `err`.
        const failed = err?.message ?? events.find((e) => e.error)?.error;
        if (failed) reject(new Error(failed));
        else resolve();
      }),
    );
    return null;
  } catch (err) {
    return (err as Error).message;
  }
}

let bridge: TestBridge;
let gateway: string;
const metadataRequests: string[] = [];
/** The Authorization headers the token-realm registry was sent: what dockerd got from its "token service". */
const tokensShown: string[] = [];
let metadata: Listening<HttpServer>;
let realmRegistry: Listening<HttpServer>;
let redirectRegistry: Listening<HttpServer>;
let listedForward: Listening<Server>;
let unlistedForward: Listening<Server>;
/** The registry of the node's own (replica) images. */
let ownForward: Listening<Server>;
const replicaPulls = new ReplicaPullWindow();
let proxy: PullProxy;
const engines: SecondDockerd[] = [];

/** A TCP relay from the gateway address to the test registry on loopback: a registry dockerd reaches through a proxy. */
const forwarderToRegistry = (): Server =>
  createServer((socket) => {
    const upstream = connect(Number(REGISTRY.split(':')[1]), '127.0.0.1');
    socket.pipe(upstream).pipe(socket);
    socket.on('error', () => upstream.destroy());
    upstream.on('error', () => socket.destroy());
  });

beforeAll(async () => {
  if (!(await dockerAvailable(shared))) throw new Error('no Docker engine on /var/run/docker.sock; run `bash scripts/setup-host.sh` as root');
  bridge = await makeTestBridge();
  gateway = bridge.address;

  metadata = await listen(
    createHttpServer((req, res) => {
      metadataRequests.push(req.url ?? '');
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"Code":"Success","Token":"the-host-role-credentials"}');
    }),
    gateway,
  );
  const metadataUrl = `http://${gateway}:${metadata.port}/latest/meta-data/iam/security-credentials/node-role`;
  // Its token service is "wherever the registry says": here, the metadata service.
  realmRegistry = await listen(
    createHttpServer((req, res) => {
      if (req.headers.authorization) tokensShown.push(req.headers.authorization);
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${metadataUrl}",service="registry",scope="repository:app:pull"`, 'content-type': 'application/json' }).end('{"errors":[]}');
    }),
    gateway,
  );
  // Serves a manifest, then sends every blob download to the metadata service.
  const config = JSON.stringify({ architecture: 'amd64', os: 'linux', config: {}, rootfs: { type: 'layers', diff_ids: [sha256('layer')] } });
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: config.length, digest: sha256(config) },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: 5, digest: sha256('layer') }],
  });
  redirectRegistry = await listen(
    createHttpServer((req, res) => {
      const url = req.url ?? '';
      if (url === '/v2/') res.writeHead(200, { 'docker-distribution-api-version': 'registry/2.0' }).end('{}');
      else if (url.includes('/manifests/')) {
        res.writeHead(200, { 'content-type': 'application/vnd.docker.distribution.manifest.v2+json', 'content-length': manifest.length, 'docker-content-digest': sha256(manifest) });
        res.end(req.method === 'HEAD' ? undefined : manifest);
      } else if (url.includes('/blobs/')) res.writeHead(307, { location: metadataUrl }).end();
      else res.writeHead(404).end();
    }),
    gateway,
  );
  listedForward = await listen(forwarderToRegistry(), gateway);
  unlistedForward = await listen(forwarderToRegistry(), gateway);
  ownForward = await listen(forwarderToRegistry(), gateway);
  proxy = await startPullProxy({
    port: 0,
    log: createLogger('silent', 'pull-proxy-test'),
    policy: {
      allowed: [`${gateway}:${realmRegistry.port}`, `${gateway}:${redirectRegistry.port}`, `${gateway}:${listedForward.port}`],
      replicaOnly: [`${gateway}:${ownForward.port}`],
      replicaPulls,
    },
  });
});

afterAll(async () => {
  for (const engine of engines) await engine.stop();
  await proxy?.close();
  for (const l of [metadata, realmRegistry, redirectRegistry, listedForward, unlistedForward, ownForward]) l?.server.close();
  await bridge?.remove();
});

const engine = async (env: Record<string, string>): Promise<Docker> => {
  const started = await startSecondDockerd({ env, bridge, insecureRegistries: [`${gateway}/32`] });
  engines.push(started);
  return started.docker;
};
const throughProxy = () => engine({ HTTP_PROXY: proxy.url, HTTPS_PROXY: proxy.url });
const repository = BUSYBOX_IMAGE.slice(REGISTRY.length + 1);

describe('dockerd pulling through the pull proxy', () => {
  it('without the proxy, a registry sends dockerd to the metadata service, for its token or for a layer (what the proxy is for)', async () => {
    const direct = await engine({});
    metadataRequests.length = 0;
    await pullError(direct, `${gateway}:${realmRegistry.port}/app:1`);
    expect(metadataRequests).toEqual(['/latest/meta-data/iam/security-credentials/node-role?scope=repository%3Aapp%3Apull&service=registry']);
    // ...and hands the registry what the metadata service answered.
    expect(new Set(tokensShown)).toEqual(new Set(['Bearer the-host-role-credentials']));
    metadataRequests.length = 0;
    await pullError(direct, `${gateway}:${redirectRegistry.port}/app:1`);
    expect(metadataRequests.length).toBeGreaterThan(0);
  });

  it('pulls a real image from a listed registry, and refuses the same registry unlisted', async () => {
    const docker = await throughProxy();
    expect(await pullError(docker, `${gateway}:${listedForward.port}/${repository}`)).toBeNull();
    const image = await docker.getImage(`${gateway}:${listedForward.port}/${repository}`).inspect();
    expect(image.Os).toBe('linux');

    const refused = await pullError(docker, `${gateway}:${unlistedForward.port}/${repository}`);
    expect(refused).toContain(`Refused by the node: ${gateway} is not on a public address (reserved)`);
  });

  it("reaches a registry of the node's own images only while a replica's pull is under way", async () => {
    const docker = await throughProxy();
    const own = `${gateway}:${ownForward.port}/${repository}`;
    expect(await pullError(docker, own)).toContain(`Refused by the node: ${gateway} is not on a public address (reserved)`);
    const end = replicaPulls.begin();
    try {
      expect(await pullError(docker, own)).toBeNull();
    } finally {
      end();
    }
    await docker.getImage(own).remove({ force: true });
    expect(await pullError(docker, own)).toContain('Refused by the node');
  });

  it("refuses the registry's token service when it is the metadata service: nothing reaches it", async () => {
    const docker = await throughProxy();
    metadataRequests.length = 0;
    tokensShown.length = 0;
    const refused = await pullError(docker, `${gateway}:${realmRegistry.port}/app:1`);
    expect(refused).toContain(`denied: Refused by the node: ${gateway} is not on a public address (reserved)`);
    expect(metadataRequests).toEqual([]);
    expect(tokensShown).toEqual([]);
  });

  it('refuses a layer download redirected to the metadata service: nothing reaches it', async () => {
    const docker = await throughProxy();
    metadataRequests.length = 0;
    const refused = await pullError(docker, `${gateway}:${redirectRegistry.port}/app:1`);
    expect(refused).toContain(`Refused by the node: ${gateway} is not on a public address (reserved)`);
    expect(metadataRequests).toEqual([]);
  });
});
