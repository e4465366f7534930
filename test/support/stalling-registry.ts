// A registry a hostile tenant could run: it serves an image's manifest and config at once,
// then answers the layer's download with its headers and a first chunk, and sends nothing
// more. The engine pulls from it over plain HTTP (127.0.0.0/8 is an insecure registry by
// default). It counts the layer downloads still open, so a test sees the engine give up.
import { createHash } from 'node:crypto';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StallingRegistry {
  /** `127.0.0.1:<port>/svc/stalls:1`. */
  image: string;
  /** Layer downloads the engine holds open right now. */
  openDownloads(): number;
  close(): Promise<void>;
}

const sha256 = (data: Buffer | string): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

export async function startStallingRegistry(layerBytes = 50 * 1024 * 1024): Promise<StallingRegistry> {
  const config = JSON.stringify({
    architecture: 'amd64',
    os: 'linux',
    config: { Cmd: ['sh'] },
    rootfs: { type: 'layers', diff_ids: [sha256('never sent whole')] },
  });
  const layerDigest = sha256(`a layer of ${layerBytes} bytes that never arrives`);
  const manifest = JSON.stringify({
    schemaVersion: 2,
    mediaType: 'application/vnd.docker.distribution.manifest.v2+json',
    config: { mediaType: 'application/vnd.docker.container.image.v1+json', size: Buffer.byteLength(config), digest: sha256(config) },
    layers: [{ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', size: layerBytes, digest: layerDigest }],
  });
  const held = new Set<ServerResponse>();
  const send = (res: ServerResponse, type: string, body: string, head: boolean) => {
    res.writeHead(200, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'docker-content-digest': sha256(body) });
    res.end(head ? undefined : body);
  };
  const server = createServer((req, res) => {
    const url = req.url ?? '';
    const head = req.method === 'HEAD';
    res.setHeader('docker-distribution-api-version', 'registry/2.0');
    if (url === '/v2/') return send(res, 'application/json', '{}', head);
    if (url.endsWith('/manifests/1') || url.endsWith(`/manifests/${sha256(manifest)}`)) return send(res, 'application/vnd.docker.distribution.manifest.v2+json', manifest, head);
    if (url.endsWith(`/blobs/${sha256(config)}`)) return send(res, 'application/octet-stream', config, head);
    if (url.endsWith(`/blobs/${layerDigest}`)) {
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': layerBytes });
      res.write(Buffer.alloc(64 * 1024)); // a start, then silence
      held.add(res);
      res.on('close', () => held.delete(res));
      return;
    }
    res.writeHead(404, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ errors: [{ code: 'NAME_UNKNOWN', message: url }] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    image: `127.0.0.1:${port}/svc/stalls:1`,
    openDownloads: () => held.size,
    close: async () => {
      for (const res of held) res.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
