// A registry a tenant controls, speaking the v2 API with whatever manifests and blobs a test
// gives it (a real one would not serve a manifest naming blobs it lacks, or configs of any
// size): for what an instance's image can do to a node.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export const MANIFEST_V2 = 'application/vnd.docker.distribution.manifest.v2+json';
export const digestOf = (body: Buffer | string): string => `sha256:${createHash('sha256').update(body).digest('hex')}`;

export interface TenantRegistry {
  /** host:port, what an image reference names. */
  address: string;
  /** `repo:tag` to a manifest. */
  manifests: Map<string, Buffer>;
  blobs: Map<string, Buffer>;
  /** Requests received, `METHOD path`. */
  log: string[];
  /** The User-Agent of each request in `log`: who connected (dockerd, or the node agent). */
  clients: string[];
  /** Blob digest to the URL its download is redirected to. */
  redirects: Map<string, string>;
  /** When set, every request but the token's needs `Authorization: Bearer <token>`, and the challenge names this realm. */
  bearerRealm?: string;
  /** Manifests sent without a Content-Length (chunked), as a registry streaming one would. */
  chunked?: boolean;
  /** Blobs sent a byte a second, as a registry holding a download open would. */
  slowBlobs: Set<string>;
  /** Basic credentials every request must carry, when set. */
  basicAuth?: { username: string; password: string };
  close(): Promise<void>;
}

export async function startTenantRegistry(): Promise<TenantRegistry> {
  const registry: TenantRegistry = { address: '', manifests: new Map(), blobs: new Map(), log: [], clients: [], redirects: new Map(), slowBlobs: new Set(), close: async () => undefined };
  const server: Server = createServer((req, res) => {
    const url = req.url ?? '';
    registry.log.push(`${req.method} ${url}`);
    registry.clients.push(req.headers['user-agent'] ?? '');
    // The registry's own token service: an anonymous token for anyone who asks.
    if (url.startsWith('/token')) return void res.writeHead(200, { 'content-type': 'application/json' }).end('{"token":"tenant-token"}');
    if (registry.bearerRealm && req.headers.authorization !== 'Bearer tenant-token') {
      res.writeHead(401, { 'www-authenticate': `Bearer realm="${registry.bearerRealm}",service="tenant"`, 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      return;
    }
    const auth = registry.basicAuth;
    if (auth && req.headers.authorization !== `Basic ${Buffer.from(`${auth.username}:${auth.password}`).toString('base64')}`) {
      res.writeHead(401, { 'www-authenticate': 'Basic realm="tenant"', 'content-type': 'application/json' }).end('{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}');
      return;
    }
    if (url === '/v2/' || url === '/v2') {
      res.writeHead(200, { 'docker-distribution-api-version': 'registry/2.0' }).end('{}');
      return;
    }
    const manifest = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(url);
    if (manifest) {
      const [, repo, ref] = manifest;
      const body = registry.manifests.get(`${repo}:${ref}`) ?? [...registry.manifests.entries()].find(([key, m]) => key.startsWith(`${repo}:`) && digestOf(m) === ref)?.[1];
      if (!body) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}');
      let mediaType = MANIFEST_V2;
      try {
        mediaType = (JSON.parse(body.toString()) as { mediaType?: string }).mediaType ?? MANIFEST_V2;
      } catch {
        // not JSON: served as a schema 2 manifest all the same
      }
      res.writeHead(200, { 'content-type': mediaType, 'docker-content-digest': digestOf(body), ...(registry.chunked ? {} : { 'content-length': body.length }) });
      return void res.end(req.method === 'HEAD' ? undefined : body);
    }
    const blob = /^\/v2\/(.+)\/blobs\/([^/]+)$/.exec(url);
    const redirect = blob ? registry.redirects.get(blob[2]!) : undefined;
    if (redirect) return void res.writeHead(307, { location: redirect }).end();
    const content = blob ? registry.blobs.get(blob[2]!) : undefined;
    if (!content) return void res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[{"code":"BLOB_UNKNOWN","message":"blob unknown"}]}');
    res.writeHead(200, { 'content-type': 'application/octet-stream', 'docker-content-digest': blob![2]!, 'content-length': content.length });
    if (req.method !== 'HEAD' && registry.slowBlobs.has(blob![2]!)) {
      let sent = 0;
      const drip = setInterval(() => (res.destroyed || sent >= content.length ? clearInterval(drip) : res.write(content.subarray(sent, ++sent))), 1_000);
      res.on('close', () => clearInterval(drip));
      return;
    }
    res.end(req.method === 'HEAD' ? undefined : content);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  registry.address = `127.0.0.1:${(server.address() as AddressInfo).port}`;
  registry.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return registry;
}

/** A schema 2 manifest of `config` and `layers`. */
export function manifestOf(config: { digest: string; size: number }, layers: Array<{ digest: string; size: number }>): Buffer {
  return Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: MANIFEST_V2,
      config: { mediaType: 'application/vnd.docker.container.image.v1+json', ...config },
      layers: layers.map((l) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', ...l })),
    }),
  );
}

/** Puts an image of `config` over `layer` (a gzipped tar and its uncompressed digest) as `repo:tag`. */
export function putImage(registry: TenantRegistry, repoTag: string, config: Record<string, unknown>, layer: { blob: Buffer; diffId: string }): void {
  const configBody = Buffer.from(JSON.stringify({ architecture: process.arch === 'arm64' ? 'arm64' : 'amd64', os: 'linux', ...config, rootfs: { type: 'layers', diff_ids: [layer.diffId] } }));
  const layerDigest = digestOf(layer.blob);
  registry.blobs.set(digestOf(configBody), configBody);
  registry.blobs.set(layerDigest, layer.blob);
  registry.manifests.set(repoTag, manifestOf({ digest: digestOf(configBody), size: configBody.length }, [{ digest: layerDigest, size: layer.blob.length }]));
}
