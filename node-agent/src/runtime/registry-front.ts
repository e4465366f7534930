// The registry dockerd pulls an instance's image from: a registry API on the node's
// loopback that serves only what the agent resolved and fetched itself (registry-client.ts).
// A tenant's registry decides what dockerd is asked to read and where it is sent, and
// dockerd trusts it more than it should: Docker 20.10 reads a manifest or an image config of
// any size whole (a 600 MiB manifest took dockerd from 1.1 to 2.7 GB, kept after), fetches a
// foreign layer from whatever URLs it names, and goes, without any proxy, wherever a token
// realm or a redirect points on the host's loopback (Go never sends loopback destinations
// through a proxy). Now dockerd talks to this front alone: the agent reads the manifest with
// a bound, checks it (image-manifest.ts), pins it by digest, fetches the blobs the node must
// have from the repository into a staging folder, each checked whole (size and sha256), and
// only then has dockerd pull `127.0.0.1:<port>/pull/<id>@<digest>` (loopback registries are
// plain HTTP to Docker by default), served from those files. The runtime then names the
// image as the tenant did and takes the front's name off (image-pulls.ts).
//
// Why whole before dockerd asks: dockerd shares a layer download in progress among every
// pull of the same digest, whoever's. Relayed live, a tenant's registry trickling a popular
// base layer held up (or failed) every other tenant's pull of that layer; from local files,
// dockerd's download of a blob lasts as long as reading it.
import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, open, rename, rm } from 'node:fs/promises';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { join } from 'node:path';
import { pipeline as pipe, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Logger } from '@svc/shared';
import { layerBytes, ManifestRefused, nodePlatform, parseManifest, pickPlatform, type Descriptor, type Platform } from './image-manifest.js';
import { locate, RegistryFailure, type RegistryClient, type RepositorySession } from './registry-client.js';

/** An image resolved and pinned, ready for its blobs to be staged and for dockerd to pull it from the front. */
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
  /** Its layers as the manifest lists them, bottom first (a layer may be listed twice). */
  layers: Descriptor[];
  /** Its config and layers, each digest once. */
  blobs: Descriptor[];
  /** The blobs staged so far: the only ones dockerd is given. */
  staged: ReadonlySet<string>;
  /**
   * Fetches `blob` from the repository into the staging folder and checks its size and
   * digest; throws RegistryFailure when they are not what the manifest says. `moved` is
   * told the bytes read so far; `signal` gives up.
   */
  stage(blob: Descriptor, moved?: (bytes: number) => void, signal?: AbortSignal): Promise<void>;
  /** Where a staged blob's file is (until release). */
  stagedFile(digest: string): string | undefined;
  /** Blobs dockerd asked for that were not staged (the node had them once, and no longer). */
  missed(): Descriptor[];
  /** Forgets it, ends its downloads and removes its files: dockerd is answered 404 for it from then on. */
  release(): void;
}

interface Served {
  manifest: { digest: string; body: Buffer; mediaType: string };
  /** What dockerd may ask for, with the size the manifest gives each. */
  blobs: Map<string, number>;
  /** Digest to its staged file. */
  staged: Map<string, string>;
  missed: Set<string>;
  /** The pull's own staging folder. */
  folder: string;
}

const API_HEADERS = { 'docker-distribution-api-version': 'registry/2.0' };
const ROUTE = /^\/v2\/pull\/([a-f0-9]{32})\/(manifests|blobs)\/(sha256:[a-f0-9]{64})$/;
/** `bytes=N-` or `bytes=N-M`, the ranges dockerd asks for when it resumes a layer. */
const RANGE = /^bytes=(\d+)-(\d*)$/;

class TooLong extends Error {}

/** A refusal in the registry API's error form: dockerd quotes `message` in the pull's error. */
function refuse(res: ServerResponse, status: number, code: string, message: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  res.writeHead(status, { ...API_HEADERS, 'content-type': 'application/json' }).end(JSON.stringify({ errors: [{ code, message }] }));
}

export class RegistryFront {
  private readonly served = new Map<string, Served>();

  private constructor(
    private readonly server: Server,
    readonly port: number,
    private readonly client: RegistryClient,
    private readonly stagingDir: string,
    private readonly log: Logger | undefined,
    private readonly platform: Platform,
  ) {}

  /**
   * `stagingDir`: where each pull's blobs are staged, in a folder of the pull's own;
   * `emptyAtStart`: the front's alone, so what a crash left there is removed.
   */
  static async start(client: RegistryClient, options: { stagingDir: string; emptyAtStart?: boolean; log?: Logger; platform?: Platform }): Promise<RegistryFront> {
    if (options.emptyAtStart) await rm(options.stagingDir, { recursive: true, force: true });
    await mkdir(options.stagingDir, { recursive: true, mode: 0o700 });
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
    front = new RegistryFront(server, port, client, options.stagingDir, options.log, options.platform ?? nodePlatform());
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
    const folder = join(this.stagingDir, id);
    const all = [manifest.config, ...manifest.layers];
    const entry: Served = {
      manifest: { digest: fetched.digest, body: fetched.body, mediaType: manifest.mediaType },
      blobs: new Map(all.map((blob) => [blob.digest, blob.size])),
      staged: new Map(),
      missed: new Set(),
      folder,
    };
    const staged = new Set<string>();
    /** A blob listed twice (a layer an image repeats) is fetched once. */
    const staging = new Map<string, Promise<void>>();
    const downloads = new AbortController();
    this.served.set(id, entry);
    return {
      reference: `127.0.0.1:${this.port}/pull/${id}@${fetched.digest}`,
      digest: fetched.digest,
      config: manifest.config,
      layerBytes: layerBytes(manifest),
      repository: `${location.registry}/${location.repository}`,
      layers: manifest.layers,
      blobs: [...new Map(all.map((blob) => [blob.digest, blob])).values()],
      staged,
      stage: (blob, moved, signal) => {
        let fetching = staging.get(blob.digest);
        if (!fetching) {
          fetching = this.fetchWhole(session, blob, folder, signal ? AbortSignal.any([signal, downloads.signal]) : downloads.signal, moved).then((file) => {
            entry.staged.set(blob.digest, file);
            entry.missed.delete(blob.digest);
            staged.add(blob.digest);
          });
          // A failed fetch may be tried again (a retry of the pull).
          fetching.catch(() => staging.delete(blob.digest));
          staging.set(blob.digest, fetching);
        }
        return fetching;
      },
      stagedFile: (digest) => entry.staged.get(digest),
      missed: () => all.filter((blob) => entry.missed.has(blob.digest)),
      release: () => {
        this.served.delete(id);
        downloads.abort(new Error('the pull ended'));
        // A file dockerd is still reading stays readable until it closes it (removing only unlinks it).
        void rm(folder, { recursive: true, force: true }).catch(() => undefined);
      },
    };
  }

  /** Fetches `blob` into `folder`, its bytes hashed as they arrive; a blob not whole and exact is not kept. */
  private async fetchWhole(session: RepositorySession, blob: Descriptor, folder: string, signal: AbortSignal, moved?: (bytes: number) => void): Promise<string> {
    await mkdir(folder, { recursive: true, mode: 0o700 });
    const file = join(folder, blob.digest.slice('sha256:'.length));
    const partial = `${file}.part`;
    const body = await this.client.blob(session, blob.digest, { signal });
    const hash = createHash('sha256');
    let size = 0;
    const checked = new Transform({
      transform(chunk: Buffer, _encoding, done) {
        size += chunk.length;
        // More than declared is cut off here, and says so below.
        if (size > blob.size) return done(new TooLong());
        hash.update(chunk);
        moved?.(size);
        done(null, chunk);
      },
    });
    try {
      try {
        await pipeline(body, checked, createWriteStream(partial, { mode: 0o600 }));
      } catch (err) {
        if (!(err instanceof TooLong)) throw err;
      }
      const digest = `sha256:${hash.digest('hex')}`;
      if (size !== blob.size || digest !== blob.digest) {
        throw new RegistryFailure(`${session.location.registry}/${session.location.repository} does not serve blob ${blob.digest} its manifest names (it sent ${size > blob.size ? 'more bytes' : `other content, ${digest}`})`, true);
      }
      await rename(partial, file);
      return file;
    } catch (err) {
      await rm(partial, { force: true });
      throw err;
    }
  }

  async close(): Promise<void> {
    const folders = [...this.served.values()].map((served) => served.folder);
    this.served.clear();
    await Promise.all(folders.map((folder) => rm(folder, { recursive: true, force: true })));
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
    if (!route) return refuse(res, 404, 'NAME_UNKNOWN', 'no pull of that name is under way on this node');
    const served = this.served.get(route[1]!);
    const digest = route[3]!;
    if (route[2] === 'blobs') return this.answerBlob(req, res, served, digest);
    if (!served) return refuse(res, 404, 'NAME_UNKNOWN', 'no pull of that name is under way on this node');
    {
      if (digest !== served.manifest.digest) return refuse(res, 404, 'MANIFEST_UNKNOWN', 'manifest unknown');
      const { body, mediaType } = served.manifest;
      res.writeHead(200, { ...API_HEADERS, 'content-type': mediaType, 'content-length': body.length, 'docker-content-digest': digest });
      res.end(req.method === 'HEAD' ? undefined : body);
      return;
    }
  }

  /**
   * A blob, from whichever pull under way staged it. dockerd shares a download among the
   * pulls of one digest and makes it under the first one's name: that pull may have been
   * released since (stopped, or given up) while another's still waits on the download, and
   * a 404 would fail them all. The bytes are the digest's, checked whole, whoever's
   * registry sent them; each pull still proves its own repository serves every blob.
   */
  private answerBlob(req: IncomingMessage, res: ServerResponse, served: Served | undefined, digest: string): void {
    const size = served?.blobs.get(digest);
    if (served && size === undefined) return refuse(res, 404, 'BLOB_UNKNOWN', 'blob unknown to this image');
    const copy = served?.staged.has(digest) ? served : [...this.served.values()].find((other) => other.staged.has(digest));
    if (!copy) {
      // dockerd had this blob when the pull began and has it no more: the runtime stages it and pulls again.
      served?.missed.add(digest);
      return refuse(res, 404, 'BLOB_UNKNOWN', served ? 'blob not staged on this node' : 'no pull of that name is under way on this node');
    }
    void this.sendFile(req, res, copy.staged.get(digest)!, digest, copy.blobs.get(digest)!);
  }

  private async sendFile(req: IncomingMessage, res: ServerResponse, file: string, digest: string, size: number): Promise<void> {
    // Opened before anything is answered: a pull released since has removed it, and one
    // released while it is read leaves it readable until it is closed.
    const handle = await open(file).catch(() => null);
    if (!handle) return refuse(res, 404, 'BLOB_UNKNOWN', 'blob unknown to this image');
    const headers = { ...API_HEADERS, 'content-type': 'application/octet-stream', 'docker-content-digest': digest, 'accept-ranges': 'bytes' };
    const range = typeof req.headers.range === 'string' ? RANGE.exec(req.headers.range) : null;
    const start = range ? Number(range[1]) : 0;
    const end = range && range[2] ? Math.min(Number(range[2]), size - 1) : size - 1;
    if (range && (start >= size || start > end)) {
      void handle.close();
      res.writeHead(416, { ...headers, 'content-range': `bytes */${size}` }).end();
      return;
    }
    if (range) res.writeHead(206, { ...headers, 'content-length': end - start + 1, 'content-range': `bytes ${start}-${end}/${size}` });
    else res.writeHead(200, { ...headers, 'content-length': size });
    if (req.method === 'HEAD') {
      void handle.close();
      res.end();
      return;
    }
    pipe(handle.createReadStream({ start, end }), res, (err) => {
      if (err) this.log?.info({ digest, err: err.message }, 'registry front: a blob was not sent whole');
    });
  }
}
