// What the agent accepts as an instance image's manifest before dockerd is asked for
// anything: the manifest a tenant's registry serves is read here, bounded, checked and
// pinned by digest (registry-front.ts). Docker 20.10 reads a manifest of any size whole
// (a 600 MiB one took dockerd from 1.1 to 2.7 GB), a config blob of any size, and fetches a
// layer carrying `urls` from those URLs itself, outside any registry: none of those reach
// dockerd now.
import { MAX_IMAGE_ANSWER_BYTES } from './docker-json.js';

export const MEDIA_TYPES = {
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  ociIndex: 'application/vnd.oci.image.index.v1+json',
} as const;

/** What the agent asks a registry for, in Docker's order of preference. */
export const MANIFEST_ACCEPT = [MEDIA_TYPES.dockerManifest, MEDIA_TYPES.dockerList, MEDIA_TYPES.ociManifest, MEDIA_TYPES.ociIndex].join(', ');

/** The OCI distribution spec's size registries should accept, and what later Docker releases read at most. */
export const MAX_MANIFEST_BYTES = 4 * 1024 * 1024;
/** An image config larger than the agent reads back from Docker (docker-json.ts) is refused before it is fetched. */
export const MAX_CONFIG_BYTES = MAX_IMAGE_ANSWER_BYTES;
/** overlay2 stacks at most 128 lower layers; an image of more fails in Docker anyway. */
export const MAX_LAYERS = 128;
/** Entries of an image index (one per platform); real ones have a dozen or two. */
export const MAX_INDEX_ENTRIES = 256;

export const DIGEST_SHAPE = /^sha256:[a-f0-9]{64}$/;

export interface Descriptor {
  mediaType: string;
  digest: string;
  size: number;
}

export interface Platform {
  os: string;
  architecture: string;
  variant?: string;
}

export type Manifest =
  | { kind: 'image'; mediaType: string; config: Descriptor; layers: Descriptor[] }
  | { kind: 'index'; mediaType: string; manifests: Array<Descriptor & { platform?: Platform }> };

/** Why a manifest is refused; the tenant reads it in the instance's failure_reason. */
export class ManifestRefused extends Error {}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

function descriptor(value: unknown, what: string): Descriptor {
  if (!isRecord(value)) throw new ManifestRefused(`its manifest's ${what} is not a descriptor`);
  const { digest, size, mediaType, urls } = value;
  if (typeof digest !== 'string' || !DIGEST_SHAPE.test(digest)) throw new ManifestRefused(`its manifest's ${what} has no sha256 digest`);
  if (typeof size !== 'number' || !Number.isSafeInteger(size) || size < 0) throw new ManifestRefused(`its manifest's ${what} has no size`);
  // dockerd fetches such a layer from the URLs themselves, past the registry and the node's checks.
  if (urls !== undefined) throw new ManifestRefused(`its manifest's ${what} names URLs to fetch it from (a foreign layer), which this node does not follow`);
  return { digest, size, mediaType: typeof mediaType === 'string' ? mediaType : '' };
}

function platformOf(value: unknown): Platform | undefined {
  if (!isRecord(value) || typeof value.os !== 'string' || typeof value.architecture !== 'string') return undefined;
  return { os: value.os, architecture: value.architecture, ...(typeof value.variant === 'string' ? { variant: value.variant } : {}) };
}

/**
 * The manifest `body` is, by its own `mediaType` or else the registry's `Content-Type` (as
 * Docker reads it), checked for what the node will not pull.
 */
export function parseManifest(body: Buffer, contentType: string | undefined): Manifest {
  let value: unknown;
  try {
    value = JSON.parse(body.toString('utf8'));
  } catch {
    throw new ManifestRefused('its manifest is not JSON');
  }
  if (!isRecord(value)) throw new ManifestRefused('its manifest is not a JSON object');
  if (value.schemaVersion === 1) throw new ManifestRefused("its manifest is Docker's schema 1, which this node does not pull; push the image again with a current Docker");
  if (value.schemaVersion !== 2) throw new ManifestRefused('its manifest is not schema version 2');
  const declared = typeof value.mediaType === 'string' ? value.mediaType : (contentType ?? '').split(';')[0]!.trim();
  const isIndex = declared === MEDIA_TYPES.dockerList || declared === MEDIA_TYPES.ociIndex || (declared !== MEDIA_TYPES.dockerManifest && declared !== MEDIA_TYPES.ociManifest && Array.isArray(value.manifests));
  if (isIndex) {
    if (!Array.isArray(value.manifests)) throw new ManifestRefused('its image index lists no manifests');
    if (value.manifests.length > MAX_INDEX_ENTRIES) throw new ManifestRefused(`its image index lists more than ${MAX_INDEX_ENTRIES} manifests`);
    const manifests = value.manifests.map((entry, i) => {
      const platform = platformOf(isRecord(entry) ? entry.platform : undefined);
      return { ...descriptor(entry, `entry ${i + 1}`), ...(platform ? { platform } : {}) };
    });
    return { kind: 'index', mediaType: declared || MEDIA_TYPES.ociIndex, manifests };
  }
  if (!Array.isArray(value.layers)) throw new ManifestRefused('its manifest lists no layers');
  if (value.layers.length > MAX_LAYERS) throw new ManifestRefused(`its manifest has ${value.layers.length} layers, more than the ${MAX_LAYERS} this node stacks`);
  const config = descriptor(value.config, 'config');
  if (config.size > MAX_CONFIG_BYTES) throw new ManifestRefused(`its image config is ${config.size} bytes, more than the ${MAX_CONFIG_BYTES} this node reads`);
  const layers = value.layers.map((layer, i) => descriptor(layer, `layer ${i + 1}`));
  return { kind: 'image', mediaType: declared || MEDIA_TYPES.ociManifest, config, layers };
}

/** The platform of this node in OCI's words (`process.arch` x64 is amd64). */
export function nodePlatform(arch: string = process.arch): Platform {
  const architecture = arch === 'x64' ? 'amd64' : arch === 'ia32' ? '386' : arch;
  return { os: 'linux', architecture, ...(architecture === 'arm64' ? { variant: 'v8' } : {}) };
}

/**
 * The entry of an index for `platform`, as Docker picks it: the os and architecture must
 * match; of those, one of the same variant (or naming none) first.
 */
export function pickPlatform(index: Extract<Manifest, { kind: 'index' }>, platform: Platform): Descriptor | null {
  const candidates = index.manifests.filter((entry) => entry.platform?.os === platform.os && entry.platform.architecture === platform.architecture);
  const best = candidates.find((entry) => entry.platform?.variant === platform.variant) ?? candidates.find((entry) => entry.platform?.variant === undefined) ?? candidates[0];
  return best ? { mediaType: best.mediaType, digest: best.digest, size: best.size } : null;
}

/** The compressed size of an image's layers, what it costs to fetch. */
export const layerBytes = (manifest: Extract<Manifest, { kind: 'image' }>): number => manifest.layers.reduce((sum, layer) => sum + layer.size, 0);
