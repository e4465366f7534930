// How images come to the node. A replica's image (the provider's choice) is pulled by
// dockerd itself, through the pull proxy. An instance's image (the tenant's choice) comes
// through the registry front (registry-front.ts): the agent resolves and checks it, fetches
// what the node must have into the front's staging folder (stage-blobs.ts), and only then
// has dockerd pull it from the front. Either way dockerd's pull is followed to one progress
// bar and given up by the stall rule, the pull's timeout and the disk's fullness.
import { randomBytes } from 'node:crypto';
import { readFile, statfs } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Logger } from '@svc/shared';
import { engineError, isNotFound, pullFailed } from './docker-errors.js';
import { formatBytes } from './disk-usage.js';
import { addressesOf, registryHost, registryListed, registryOf, type RegistryPolicy } from './image-registry.js';
import { localImageName } from './image-reference.js';
import { BlobSources } from './blob-sources.js';
import { RegistryFront, type PreparedPull } from './registry-front.js';
import { isInsecureRegistry, RegistryClient, RegistryFailure, type DockerdRegistryConfig } from './registry-client.js';
import { ManifestRefused, type Descriptor } from './image-manifest.js';
import { chainIds, diffIdsOf, layersToFetch } from './layer-chains.js';
import { dockerJson, MAX_IMAGE_ANSWER_BYTES } from './docker-json.js';
import { reserved, stageBlobs, stagingRefusal, StagingStopped } from './stage-blobs.js';
import { PullCoordinator } from './pull-coordinator.js';
import { formatDuration, PullDeadline, type PullDeadlineSettings } from './pull-deadline.js';
import { PullProgressTracker, pullEventError, StagedPullProgress, type PullEvent } from './pull-progress.js';
import { RuntimeError, type ProgressListener } from './runtime.js';

export interface ImagePullOptions {
  docker: Docker;
  pullDeadline: PullDeadlineSettings;
  /** A pull whose layers add up to more (compressed) is cut off. */
  maxImageBytes: number;
  /** Asked every second while dockerd pulls: why it must stop now, null to go on. */
  diskFull?: (() => Promise<string | null>) | undefined;
  registryPolicy?: RegistryPolicy | undefined;
  /** Where the repositories that served each blob are kept; absent: in memory. */
  blobSourcesFile?: string | undefined;
  /** The registry front's staging folder, emptied when it starts; absent: one under the system's temporary folder, shared. */
  stagingDir?: string | undefined;
  /** Told the ID of an instance's image its name moved away from (image-gc.ts collects it). */
  imageUnnamed?: ((id: string) => void) | undefined;
  log?: Logger | undefined;
}

export class ImagePulls {
  /** Shared pulls of instances' images, each to the image's ID; exposed so tests can count real pulls. */
  readonly instances: PullCoordinator<string>;
  private readonly replicaPulls: PullCoordinator;
  private readonly docker: Docker;
  private readonly pullDeadline: PullDeadlineSettings;
  private readonly maxImageBytes: number;
  private readonly diskFull: (() => Promise<string | null>) | undefined;
  private readonly registryPolicy: RegistryPolicy | undefined;
  private readonly blobSources: BlobSources;
  private readonly stagingDir: string;
  private readonly ownStagingDir: boolean;
  private readonly imageUnnamed: ((id: string) => void) | undefined;
  private readonly log: Logger | undefined;
  private front: Promise<RegistryFront> | undefined;
  private dockerdRegistries: { config: Promise<DockerdRegistryConfig>; at: number } | undefined;
  /** Image ID to the chain IDs of its layers (layer-chains.ts). */
  private readonly chainsOfImage = new Map<string, string[]>();
  /** The stagings under way, each with the bytes it has still to write. */
  private readonly stagings = new Set<{ remaining: number }>();

  constructor(options: ImagePullOptions) {
    this.docker = options.docker;
    this.pullDeadline = options.pullDeadline;
    this.maxImageBytes = options.maxImageBytes;
    this.diskFull = options.diskFull;
    this.registryPolicy = options.registryPolicy;
    this.blobSources = new BlobSources(options.blobSourcesFile);
    // The agent's own folder is emptied when the front starts (what a crash left); the shared
    // temporary one, which only pulls' own folders in it ever use, is not.
    this.stagingDir = options.stagingDir ?? join(tmpdir(), 'svc-image-staging');
    this.ownStagingDir = options.stagingDir !== undefined;
    this.imageUnnamed = options.imageUnnamed;
    this.log = options.log;
    this.instances = new PullCoordinator((image, onProgress, abandoned) => this.pullInstanceImage(image, onProgress, abandoned));
    this.replicaPulls = new PullCoordinator((image, onProgress, abandoned) => this.pullImage(image, onProgress, image, abandoned));
  }

  /** A replica's image, which dockerd pulls itself. A pull from a registry of the node's own opens it to dockerd for as long as it runs (image-registry.ts). */
  async replica(image: string, onProgress?: ProgressListener): Promise<void> {
    const policy = this.registryPolicy;
    const ownRegistry = registryListed(policy?.replicaOnly, registryOf(image));
    const end = ownRegistry ? policy?.replicaPulls?.begin() : undefined;
    try {
      await this.replicaPulls.pull(image, onProgress);
    } finally {
      end?.();
    }
  }

  /** Takes `ref` off its image (the image goes too when that was its only name); a failure only leaves the name. */
  async untag(ref: string): Promise<void> {
    // Left on failure: the instance fails anyway, and its next start is refused the same way.
    await this.docker.getImage(ref).remove({ noprune: true }).catch(() => undefined);
  }

  /**
   * An instance's image, through the registry front (registry-front.ts): the agent
   * resolves and checks the manifest and fetches every blob not yet proven to come from the
   * image's repository (BlobSources) into the front's staging folder, checked whole; then
   * dockerd pulls it pinned by digest from the front, and the image is named as the tenant
   * named it (localImageName), the front's name taken off.
   */
  private async pullInstanceImage(image: string, onProgress: ProgressListener, abandoned: AbortSignal): Promise<string> {
    onProgress({ image, fraction: 0, status: `Resolving ${image}` });
    // The whole pull within the pull timeout, its manifest within the stall time: a registry
    // trickling a manifest, or a blob, holds the instance no longer. Nor does a pull every
    // start waiting for it gave up (its instance was stopped before it was ready).
    const overall = AbortSignal.any([AbortSignal.timeout(this.pullDeadline.timeoutMs), abandoned]);
    const manifestBy = Math.min(this.pullDeadline.stallMs, this.pullDeadline.timeoutMs);
    const resolving = AbortSignal.any([overall, AbortSignal.timeout(manifestBy)]);
    let prepared: PreparedPull;
    try {
      prepared = await (await this.registryFront()).prepare(image, resolving);
    } catch (err) {
      if (abandoned.aborted) throw pullAbandoned(image);
      if (resolving.aborted) throw new RuntimeError('pull_failed', `pull of ${image} stopped: its registry gave no manifest within ${formatDuration(manifestBy)}`, false);
      if (err instanceof ManifestRefused) throw new RuntimeError('pull_failed', `pull of ${image} refused: ${err.message}`, false);
      if (err instanceof RegistryFailure) throw new RuntimeError('pull_failed', `pull of ${image} failed: ${err.message}`, !err.permanent);
      throw pullFailed(image, err);
    }
    // Past the pull's timeout the front answers dockerd no more, and the staging stops.
    const giveUp = () => prepared.release();
    overall.addEventListener('abort', giveUp);
    try {
      if (prepared.layerBytes > this.maxImageBytes) {
        throw new RuntimeError('pull_failed', `pull of ${image} refused: its layers are more than ${formatBytes(this.maxImageBytes)} compressed, the largest image this node pulls`, false);
      }
      // dockerd takes a config or layer it already has as it is, whoever's image brought it:
      // a manifest naming the ID of the provider's image, its layers blobs that did not
      // exist, ran that image for the tenant. So every blob not proven is fetched now, and
      // so is every blob dockerd will ask for (it is served nothing live).
      const unproven = prepared.blobs.filter((blob) => !this.blobSources.has(prepared.repository, blob.digest));
      const needed = await this.blobsDockerdLacks(prepared, image, overall, abandoned);
      const wanted = new Set([...unproven, ...needed].map((blob) => blob.digest));
      const toStage = prepared.blobs.filter((blob) => wanted.has(blob.digest) && !prepared.staged.has(blob.digest));
      const progress = new StagedPullProgress(image, onProgress, toStage.length > 0);
      await this.stage(prepared, toStage, image, progress, overall, abandoned);
      await this.pullFromFront(prepared, image, progress, overall, abandoned).catch(async (err: unknown) => {
        // A proven blob dockerd no longer had (its image was removed since): staged, and once more.
        const missed = prepared.missed();
        if (missed.length === 0 || stoppedPulls.has(err as Error)) throw err;
        await this.stage(prepared, missed, image, progress, overall, abandoned);
        await this.pullFromFront(prepared, image, progress, overall, abandoned);
      });
      const local = localImageName(image);
      const colon = local.lastIndexOf(':');
      const previous = await this.docker.getImage(local).inspect().then((info) => info.Id, () => null);
      await this.docker
        .getImage(prepared.reference)
        .tag({ repo: local.slice(0, colon), tag: local.slice(colon + 1) })
        .catch((err: unknown) => {
          throw engineError(`name the image ${image}`, err);
        });
      if (previous && previous !== prepared.config.digest) await this.noteUnnamed(previous);
      this.blobSources.record(prepared.repository, prepared.blobs.map((blob) => blob.digest));
      // Docker's ID of an image is its config's digest.
      return prepared.config.digest;
    } finally {
      overall.removeEventListener('abort', giveUp);
      prepared.release();
      await this.untag(prepared.reference);
    }
  }

  /**
   * The blobs dockerd will ask the front for: none when it has the image (its ID is the
   * config's digest); else the config and each layer whose chain no local image holds
   * (layer-chains.ts), read from the config, which is staged for that. Were one of them
   * answered 404 instead, every other pull that joined dockerd's download of that layer
   * (another tenant's, of the same base) would fail with it.
   */
  private async blobsDockerdLacks(prepared: PreparedPull, image: string, overall: AbortSignal, abandoned: AbortSignal): Promise<Descriptor[]> {
    const present = await this.docker.getImage(prepared.config.digest).inspect().then(() => true, (err: unknown) => {
      if (isNotFound(err)) return false;
      throw engineError(`inspect image ${prepared.config.digest}`, err);
    });
    if (present) return [];
    await this.stage(prepared, [prepared.config], image, null, overall, abandoned);
    const config = await readFile(prepared.stagedFile(prepared.config.digest)!, 'utf8').then((text) => JSON.parse(text) as unknown, () => null);
    return [prepared.config, ...layersToFetch(prepared.layers, diffIdsOf(config), await this.localChains())];
  }

  /** The chain IDs of every local image's layers; an image's are read once (an ID names fixed content). */
  private async localChains(): Promise<Set<string>> {
    const images = await this.docker.listImages().catch((err: unknown) => {
      throw engineError('list images', err);
    });
    const chains = new Set<string>();
    const seen = new Set<string>();
    for (const { Id } of images) {
      seen.add(Id);
      let known = this.chainsOfImage.get(Id);
      if (!known) {
        const answer = await dockerJson<{ RootFS?: { Layers?: string[] } }>(this.docker, `/images/${Id}/json`, MAX_IMAGE_ANSWER_BYTES).catch(() => null);
        known = chainIds(answer?.body?.RootFS?.Layers ?? []);
        this.chainsOfImage.set(Id, known);
      }
      for (const chain of known) chains.add(chain);
    }
    for (const id of this.chainsOfImage.keys()) if (!seen.has(id)) this.chainsOfImage.delete(id);
    return chains;
  }

  /**
   * The tenant's tag moved to another image: the one it named before, left without a name,
   * is handed to image collection by its ID (a tenant re-pushing one tag had left an image
   * on the disk per push that nothing ever removed).
   */
  private async noteUnnamed(id: string): Promise<void> {
    const info = await this.docker.getImage(id).inspect().catch(() => null);
    // Named by digest only (an operator's pull by digest), it is still someone's.
    if (info && (info.RepoTags ?? []).length === 0 && (info.RepoDigests ?? []).length === 0) this.imageUnnamed?.(id);
  }

  /** `progress`: null for a staging the bar does not show (the config, read to tell what else to stage). */
  private async stage(prepared: PreparedPull, blobs: Descriptor[], image: string, progress: StagedPullProgress | null, overall: AbortSignal, abandoned: AbortSignal): Promise<void> {
    const bytes = blobs.reduce((sum, blob) => sum + blob.size, 0);
    const disk = bytes > 0 ? await statfs(this.stagingDir).catch(() => null) : null;
    const pending = [...this.stagings].reduce((sum, staging) => sum + reserved(staging.remaining), 0);
    const refused = disk ? stagingRefusal(bytes, disk.bavail * disk.bsize, pending) : null;
    if (refused) throw new RuntimeError('pull_failed', `pull of ${image} failed: ${refused}`, true);
    // What this staging has still to write, for the stagings that start meanwhile.
    const staging = { remaining: bytes };
    this.stagings.add(staging);
    try {
      await stageBlobs(prepared, blobs, {
        deadline: this.pullDeadline,
        signal: overall,
        report: (now) => {
          staging.remaining = now.total - now.bytes;
          progress?.staging(now);
        },
      });
    } catch (err) {
      if (abandoned.aborted) throw pullAbandoned(image);
      if (err instanceof StagingStopped) throw pullStopped(image, err.message);
      if (overall.aborted) throw pullStopped(image, `it took longer than ${formatDuration(this.pullDeadline.timeoutMs)}`);
      if (err instanceof RegistryFailure) throw new RuntimeError('pull_failed', `pull of ${image} failed: ${err.message}`, !err.permanent);
      // The node's own trouble (its disk): the code says what, the path is none of the tenant's business.
      const code = (err as NodeJS.ErrnoException).code;
      if (typeof code === 'string' && code.startsWith('E')) {
        this.log?.warn({ err, image }, 'staging an image failed on the node');
        throw new RuntimeError('pull_failed', `pull of ${image} failed: the node could not stage its blobs (${code})`, true);
      }
      throw pullFailed(image, err);
    } finally {
      this.stagings.delete(staging);
    }
  }

  private async pullFromFront(prepared: PreparedPull, image: string, progress: StagedPullProgress, overall: AbortSignal, abandoned: AbortSignal): Promise<void> {
    await this.pullImage(prepared.reference, progress.pulling, image, abandoned).catch((err: unknown) => {
      if (abandoned.aborted) throw pullAbandoned(image);
      if (stoppedPulls.has(err as Error)) throw err;
      if (overall.aborted) throw pullStopped(image, `it took longer than ${formatDuration(this.pullDeadline.timeoutMs)}`);
      throw err;
    });
  }

  /** Started on the first instance pull, once. */
  private registryFront(): Promise<RegistryFront> {
    if (!this.front) {
      // A replica's pull opening the provider's registries opens nothing to an instance's.
      const { replicaPulls: _replicas, ...policy } = this.registryPolicy ?? { allowed: [] };
      const log = this.log ? { log: this.log } : {};
      const client = new RegistryClient({ ...(this.registryPolicy ? { policy } : {}), ...log, insecure: (registry) => this.insecureRegistry(registry, policy) });
      this.front = RegistryFront.start(client, { ...log, stagingDir: this.stagingDir, emptyAtStart: this.ownStagingDir });
      this.front.catch(() => (this.front = undefined));
    }
    return this.front;
  }

  /** Whether dockerd would reach `registry` over plain HTTP (`docker info`, read at most once a minute). */
  private async insecureRegistry(registry: string, policy: RegistryPolicy): Promise<boolean> {
    const now = Date.now();
    if (!this.dockerdRegistries || now - this.dockerdRegistries.at > 60_000) {
      const config = this.docker.info().then((info: { RegistryConfig?: DockerdRegistryConfig }) => info.RegistryConfig ?? {});
      this.dockerdRegistries = { config, at: now };
      config.catch(() => (this.dockerdRegistries = undefined));
    }
    const config = await this.dockerdRegistries.config;
    return isInsecureRegistry(registry, config, await addressesOf(registryHost(registry), policy, registryListed(policy.allowed, registry)));
  }

  /**
   * `shown`: the name the tenant gave, when dockerd pulls another (the front's).
   * `abandoned`: nobody waits for the image any more; the pull is dropped as a stalled one is.
   */
  private async pullImage(image: string, onProgress: ProgressListener, shown: string = image, abandoned?: AbortSignal): Promise<void> {
    const tracker = new PullProgressTracker(shown);
    onProgress(tracker.update({ status: `Pulling ${shown}` }));
    let stream: NodeJS.ReadableStream;
    try {
      stream = await this.docker.pull(image);
    } catch (err) {
      throw pullFailed(shown, renamed(err, image, shown));
    }
    let dropped: (() => void) | undefined;
    const deadline = new PullDeadline(this.pullDeadline, Date.now());
    let watch: NodeJS.Timeout | undefined;
    const lastStatus = await new Promise<string | undefined>((resolve, reject) => {
      let last: string | undefined;
      let streamError: string | null = null;
      let stopped: RuntimeError | null = null;
      // Closing the stream is the only way to ask the engine to drop the pull; a layer
      // download in flight may still go on until the registry ends it (docs/security.md).
      const stop = (why: string | RuntimeError) => {
        stopped ??= typeof why === 'string' ? pullStopped(shown, why) : why;
        (stream as NodeJS.ReadableStream & { destroy(): void }).destroy();
      };
      dropped = () => stop(pullAbandoned(shown));
      if (abandoned?.aborted) dropped();
      else abandoned?.addEventListener('abort', dropped, { once: true });
      let measuring = false;
      watch = setInterval(() => {
        const overdue = deadline.overdue(Date.now());
        if (overdue) return stop(overdue);
        if (!this.diskFull || measuring) return;
        measuring = true;
        this.diskFull()
          .then((full) => full && stop(full), () => undefined)
          .finally(() => (measuring = false));
      }, Math.min(1_000, this.pullDeadline.stallMs / 4));
      this.docker.modem.followProgress(
        stream,
        (err: Error | null) => {
          // followProgress does not treat an `error` line as a failure; we do.
          if (stopped) reject(stopped);
          else if (err || streamError) reject(pullFailed(shown, renamed(err ?? new Error(streamError ?? ''), image, shown)));
          else resolve(last);
        },
        (event: PullEvent) => {
          if (stopped) return;
          const error = pullEventError(event);
          if (error) streamError ??= error;
          else {
            last = event.status === undefined ? undefined : renamedText(event.status, image, shown);
            onProgress(tracker.update(last === undefined ? event : { ...event, status: last }));
            deadline.moved(tracker.movedBytes(), Date.now());
          }
          // A tenant names the image: one of a terabyte would fill the node's disk for every
          // tenant before any container limit applies.
          if (tracker.layerBytes() > this.maxImageBytes) {
            stop(`its layers are more than ${formatBytes(this.maxImageBytes)} compressed, the largest image this node pulls`);
          }
        },
      );
    }).finally(() => {
      clearInterval(watch);
      if (dropped) abandoned?.removeEventListener('abort', dropped);
    });
    // dockerd calls every pull from the front, under a name new each time, a newer image.
    const fetched = tracker.layersFetched() > 0 ? 'Downloaded newer image' : 'Image is up to date';
    onProgress(tracker.complete(image === shown ? lastStatus : `Status: ${fetched} for ${shown}`));
  }
}

/** Pulls the agent gave up (stall, timeout, disk): their reason stands, whatever else failed after. */
const stoppedPulls = new WeakSet<Error>();

function pullStopped(image: string, why: string): RuntimeError {
  const err = new RuntimeError('pull_failed', `pull of ${image} stopped: ${why}`, false);
  stoppedPulls.add(err);
  return err;
}

/** A pull every start waiting for gave up (their instances were stopped before they were ready). */
function pullAbandoned(image: string): RuntimeError {
  const err = new RuntimeError('pull_failed', `pull of ${image} stopped: no start waits for it any more`, false);
  stoppedPulls.add(err);
  return err;
}

/** `text` with the name dockerd pulled (the front's, and its path as dockerd also writes it) put back as the tenant's. */
function renamedText(text: string, pulled: string, shown: string): string {
  if (pulled === shown) return text;
  const at = pulled.indexOf('@');
  const repository = at < 0 ? pulled : pulled.slice(0, at);
  const path = repository.slice(repository.indexOf('/') + 1);
  return text.split(pulled).join(shown).split(repository).join(shown).split(path).join(shown);
}

/** An error of dockerd's with the front's name put back as the tenant's. */
function renamed(err: unknown, pulled: string, shown: string): unknown {
  if (pulled === shown || !(err instanceof Error)) return err;
  err.message = renamedText(err.message, pulled, shown);
  const json = (err as { json?: { message?: unknown } }).json;
  if (json && typeof json.message === 'string') json.message = renamedText(json.message, pulled, shown);
  return err;
}
