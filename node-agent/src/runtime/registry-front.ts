// The registry dockerd pulls an instance's image from: a registry API on the node's
// loopback that serves only what the agent resolved itself (registry-client.ts). A tenant's
// registry decides what dockerd is asked to read and where it is sent, and dockerd trusts
// it more than it should: Docker 20.10 reads a manifest or an image config of any size
// whole (a 600 MiB manifest took dockerd from 1.1 to 2.7 GB, kept after), fetches a
// foreign layer from whatever URLs it names, and goes, without any proxy, wherever a token
// realm or a redirect points on the host's loopback (Go never sends loopback destinations
// through a proxy). Now dockerd talks to this front alone: the agent reads the manifest with
// a bound, checks it (image-manifest.ts), pins it by digest, and serves dockerd that
// manifest and the blobs it names, fetched through the agent's checked connections and cut
// at the size the manifest gives them. dockerd pulls `127.0.0.1:<port>/pull/<id>@<digest>`
// (loopback registries are plain HTTP to Docker by default); the runtime then names the
// image as the tenant did and takes the front's name off (docker-runtime.ts).
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { Transform, pipeline } from 'node:stream';
import type { Logger } from '@svc/shared';
import { layerBytes, ManifestRefused, nodePlatform, parseManifest, pickPlatform, type Descriptor, type Platform } from './image-manifest.js';
import { discard, locate, RegistryFailure, type RegistryClient, type RepositorySession } from './registry-client.js';

/** An image resolved and pinned, ready for dockerd to pull from the front. */
export interface PreparedPull {
  /** What dockerd pulls. */
  reference: string;
  /** The image manifest's digest (an index's entry for this node's platform). */
  digest: string;
  config: Descriptor;
  /** The compressed size of its layers. */
  layerBytes: number;
  /** The repository it comes from (`registry/path`), as BlobSources records it. */
  repository: string;
  /** Its config and layers. */
  blobs: Descriptor[];
  /** The blobs dockerd fetched whole from the front so far. */
  served: ReadonlySet<string>;
  /**
   * Fetches `blob` from the repository and checks its size and digest; throws
   * RegistryFailure when they are not what the manifest says. `moved` is told the bytes
   * read so far; `signal` gives up.
   */
  check(blob: Descriptor, moved?: (bytes: number) => void, signal?: AbortSignal): Promise<void>;
  /** The first blob the front could not fetch for dockerd, in the agent's words (dockerd's own are about `docker login`). */
  failure(): RegistryFailure | undefined;
  /** Forgets it and ends its downloads: dockerd is answered 404 for it from then on. */
  release(): void;
}

interface Served {
  session: RepositorySession;
  manifest: { digest: string; body: Buffer; mediaType: string };
  /** What dockerd may fetch, with the size the manifest gives each. */
  blobs: Map<string, number>;
  served: Set<string>;
  /** Ends whatever is still fetched for it (dockerd's pull was stopped, or ended). */
  downloads: AbortController;
  failure?: RegistryFailure;
}

const API_HEADERS = { 'docker-distribution-api-version': 'registry/2.0' };
const ROUTE = /^\/v2\/pull\/([a-f0-9]{32})\/(manifests|blobs)\/(sha256:[a-f0-9]{64})$/;

/** A refusal in the registry API's error form: dockerd quotes `message` in the pull's error. */
function refuse(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { ...API_HEADERS, 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code, message }] }));
}

/** Passes at most `size` bytes and fails past them: a registry sending more than it declared is cut off. */
function bounded(size: number): Transform {
  let seen = 0;
  return new Transform({
    transform(chunk: Buffer, _encoding, done) {
      seen += chunk.length;
      if (seen > size) done(new Error(`the registry sent more than the ${size} bytes its manifest gives this blob`));
      else done(null, chunk);
    },
  });
}

export class RegistryFront {
  private readonly served = new Map<string, Served>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly client: RegistryClient,
    private readonly log: Logger | undefined,
    private readonly platform: Platform,
  ) {}

  static async start(client: RegistryClient, options: { log?: Logger; platform?: Platform } = {}): Promise<RegistryFront> {
    let front: RegistryFront | undefined;
    const server = createServer((req, res) => front!.answer(req, res));
    server.on('clientError', (_err, socket) => socket.destroy());
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    // Started on the first instance pull; it must not keep the agent's process alive.
    server.unref();
    const address = server.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    front = new RegistryFront(server, port, client, options.log, options.platform ?? nodePlatform());
    return front;
  }

  /**
   * Resolves `image` (tagged or by digest) at its registry: the manifest, for an index the
   * entry for this node's platform, each read with a bound and checked. Throws
   * RegistryFailure (the registry, or the node's refusal of a connection) or
   * ManifestRefused, worded for the tenant.
   */
  async prepare(image: string, signal?: AbortSignal): Promise<PreparedPull> {
    const location = locate(image);
    const session = await this.client.open(location, signal);
    let fetched = await this.client.manifest(session, location.reference, signal);
    let manifest = parseManifest(fetched.body, fetched.mediaType);
    if (manifest.kind === 'index') {
      const entry = pickPlatform(manifest, this.platform);
      if (!entry) throw new ManifestRefused(`it has no image for ${this.platform.os}/${this.platform.architecture}, this node's platform`);
      fetched = await this.client.manifest(session, entry.digest, signal);
      manifest = parseManifest(fetched.body, fetched.mediaType);
      if (manifest.kind === 'index') throw new ManifestRefused("its index's entry for this node is another index");
    }
    const id = randomBytes(16).toString('hex');
    const blobs = new Map<string, number>([[manifest.config.digest, manifest.config.size]]);
    for (const layer of manifest.layers) blobs.set(layer.digest, layer.size);
    const served = new Set<string>();
    const downloads = new AbortController();
    const entry: Served = { session, manifest: { digest: fetched.digest, body: fetched.body, mediaType: manifest.mediaType }, blobs, served, downloads };
    this.served.set(id, entry);
    return {
      reference: `127.0.0.1:${this.port}/pull/${id}@${fetched.digest}`,
      digest: fetched.digest,
      config: manifest.config,
      layerBytes: layerBytes(manifest),
      repository: `${location.registry}/${location.repository}`,
      blobs: [manifest.config, ...manifest.layers],
      served,
      check: (blob, moved, signal) => this.check(session, blob, signal ? AbortSignal.any([signal, downloads.signal]) : downloads.signal, moved),
      failure: () => entry.failure,
      release: () => {
        this.served.delete(id);
        downloads.abort(new Error('the pull ended'));
      },
    };
  }

  private async check(session: RepositorySession, blob: Descriptor, signal: AbortSignal, moved?: (bytes: number) => void): Promise<void> {
    const answer = await this.client.blob(session, blob.digest, { signal });
    const hash = createHash('sha256');
    let size = 0;
    for await (const chunk of answer.body) {
      size += (chunk as Buffer).length;
      if (size > blob.size) {
        discard(answer.body);
        break;
      }
      hash.update(chunk as Buffer);
      moved?.(size);
    }
    const digest = `sha256:${hash.digest('hex')}`;
    if (size !== blob.size || digest !== blob.digest) {
      throw new RegistryFailure(`${session.location.registry}/${session.location.repository} does not serve blob ${blob.digest} its manifest names (it sent ${size > blob.size ? 'more bytes' : `other content, ${digest}`})`, true);
    }
  }

  async close(): Promise<void> {
    for (const served of this.served.values()) served.downloads.abort(new Error('the node agent is stopping'));
    this.served.clear();
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      this.server.closeAllConnections();
    });
  }

  private answer(req: IncomingMessage, res: ServerResponse): void {
    const path = (req.url ?? '').split('?')[0]!;
    if (req.method !== 'GET' && req.method !== 'HEAD') return refuse(res, 405, 'UNSUPPORTED', 'this registry serves pulls only');
    if (path === '/v2/' || path === '/v2') {
      res.writeHead(200, { ...API_HEADERS, 'content-type': 'application/json' }).end('{}');
      return;
    }
    const route = ROUTE.exec(path);
    const served = route ? this.served.get(route[1]!) : undefined;
    if (!route || !served) return refuse(res, 404, 'NAME_UNKNOWN', 'no pull of that name is under way on this node');
    const digest = route[3]!;
    if (route[2] === 'manifests') {
      if (digest !== served.manifest.digest) return refuse(res, 404, 'MANIFEST_UNKNOWN', 'manifest unknown');
      const { body, mediaType } = served.manifest;
      res.writeHead(200, { ...API_HEADERS, 'content-type': mediaType, 'content-length': body.length, 'docker-content-digest': digest });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
    const size = served.blobs.get(digest);
    if (size === undefined) return refuse(res, 404, 'BLOB_UNKNOWN', 'blob unknown to this image');
    if (req.method === 'HEAD') {
      res.writeHead(200, { ...API_HEADERS, 'content-type': 'application/octet-stream', 'content-length': size, 'docker-content-digest': digest }).end();
      return;
    }
    void this.relayBlob(req, res, served, digest, size);
  }

  private async relayBlob(req: IncomingMessage, res: ServerResponse, served: Served, digest: string, size: number): Promise<void> {
    const range = typeof req.headers.range === 'string' ? req.headers.range : undefined;
    let upstream;
    try {
      upstream = await this.client.blob(served.session, digest, { ...(range ? { range } : {}), signal: served.downloads.signal });
    } catch (err) {
      const message = err instanceof RegistryFailure ? err.message : `blob ${digest}: ${(err as Error).message}`;
      this.log?.info({ digest, err: message }, 'registry front: a blob could not be fetched');
      if (err instanceof RegistryFailure) served.failure ??= err;
      // dockerd retries a 5xx and reports `denied: …` for a 403, which the runtime reads as final.
      if (err instanceof RegistryFailure && err.permanent) return refuse(res, 403, 'DENIED', message);
      return refuse(res, 502, 'BLOB_UNKNOWN', message);
    }
    const declared = Number(upstream.headers['content-length']);
    if (upstream.status === 200 && Number.isFinite(declared) && declared !== size) {
      discard(upstream.body);
      return refuse(res, 502, 'SIZE_INVALID', `blob ${digest}: the registry declared ${declared} bytes, its manifest ${size}`);
    }
    res.writeHead(upstream.status, { ...API_HEADERS, 'content-type': 'application/octet-stream', 'docker-content-digest': digest, ...upstream.headers });
    // dockerd checks the digest of what it read; what is cut here is a registry sending more.
    pipeline(upstream.body, bounded(size), res, (err) => {
      if (err) this.log?.info({ digest, err: err.message }, 'registry front: a blob relay ended early');
      // Whole or resumed (206): dockerd checks the digest of all it assembles, and only a pull that succeeds is recorded.
      else served.served.add(digest);
    });
    res.once('close', () => discard(upstream.body));
  }
}
