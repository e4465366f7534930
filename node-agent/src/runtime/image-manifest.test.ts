import { describe, expect, it } from 'vitest';
import { ManifestRefused, MAX_CONFIG_BYTES, MAX_LAYERS, MEDIA_TYPES, nodePlatform, parseManifest, pickPlatform, type Manifest } from './image-manifest.js';

const digest = (c: string) => `sha256:${c.repeat(64)}`;
const config = { mediaType: 'application/vnd.docker.container.image.v1+json', digest: digest('c'), size: 100 };
const layer = (c: string, size = 10) => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: digest(c), size });
const body = (value: unknown) => Buffer.from(JSON.stringify(value));
const image = (extra: Record<string, unknown> = {}) => ({ schemaVersion: 2, mediaType: MEDIA_TYPES.dockerManifest, config, layers: [layer('a'), layer('b')], ...extra });

describe('parseManifest', () => {
  it('reads an image manifest, by its mediaType or else the Content-Type', () => {
    expect(parseManifest(body(image()), undefined)).toEqual({ kind: 'image', mediaType: MEDIA_TYPES.dockerManifest, config, layers: [layer('a'), layer('b')] });
    const { mediaType: _none, ...untyped } = image();
    expect(parseManifest(body(untyped), `${MEDIA_TYPES.ociManifest}; charset=utf-8`)).toMatchObject({ kind: 'image', mediaType: MEDIA_TYPES.ociManifest });
    expect(parseManifest(body(untyped), undefined)).toMatchObject({ kind: 'image', mediaType: MEDIA_TYPES.ociManifest });
  });

  it('reads an index, by its mediaType or by its list of manifests', () => {
    const entry = { ...layer('d', 500), mediaType: MEDIA_TYPES.dockerManifest, platform: { os: 'linux', architecture: 'arm64', variant: 'v8' } };
    expect(parseManifest(body({ schemaVersion: 2, mediaType: MEDIA_TYPES.dockerList, manifests: [entry] }), undefined)).toEqual({ kind: 'index', mediaType: MEDIA_TYPES.dockerList, manifests: [entry] });
    expect(parseManifest(body({ schemaVersion: 2, manifests: [entry] }), undefined)).toMatchObject({ kind: 'index', mediaType: MEDIA_TYPES.ociIndex });
  });

  it.each<[string, Buffer, RegExp]>([
    ['not JSON', Buffer.from('<html>'), /is not JSON/],
    ['an array', body([1]), /not a JSON object/],
    ['schema 1', body({ schemaVersion: 1, fsLayers: [] }), /schema 1/],
    ['no schema version', body({ config, layers: [] }), /not schema version 2/],
    ['no layers', body(image({ layers: undefined })), /lists no layers/],
    ['a config without a digest', body(image({ config: { size: 3 } })), /config has no sha256 digest/],
    ['a sha512 digest', body(image({ config: { ...config, digest: `sha512:${'a'.repeat(128)}` } })), /config has no sha256 digest/],
    ['a negative size', body(image({ layers: [layer('a', -1)] })), /layer 1 has no size/],
    ['a fractional size', body(image({ layers: [layer('a', 1.5)] })), /layer 1 has no size/],
    ['a foreign layer', body(image({ layers: [layer('a'), { ...layer('b'), urls: ['http://169.254.169.254/'] }] })), /layer 2 names URLs to fetch it from/],
    ['a config past the bound', body(image({ config: { ...config, size: MAX_CONFIG_BYTES + 1 } })), /image config is 8388609 bytes/],
    ['too many layers', body(image({ layers: Array.from({ length: MAX_LAYERS + 1 }, () => layer('a')) })), /129 layers, more than the 128/],
    ['an index entry without a digest', body({ schemaVersion: 2, mediaType: MEDIA_TYPES.ociIndex, manifests: [{ size: 3 }] }), /entry 1 has no sha256 digest/],
    ['an index of no list', body({ schemaVersion: 2, mediaType: MEDIA_TYPES.ociIndex }), /lists no manifests/],
  ])('refuses %s', (_name, manifest, message) => {
    expect(() => parseManifest(manifest, undefined)).toThrow(ManifestRefused);
    expect(() => parseManifest(manifest, undefined)).toThrow(message);
  });
});

describe('pickPlatform', () => {
  const entry = (c: string, platform?: { os: string; architecture: string; variant?: string }) => ({ mediaType: MEDIA_TYPES.ociManifest, digest: digest(c), size: 1, ...(platform ? { platform } : {}) });
  const index = (...manifests: Array<ReturnType<typeof entry>>): Extract<Manifest, { kind: 'index' }> => ({ kind: 'index', mediaType: MEDIA_TYPES.ociIndex, manifests });

  it.each([
    ['the os and architecture', index(entry('1', { os: 'linux', architecture: 'arm64' }), entry('2', { os: 'linux', architecture: 'amd64' })), { os: 'linux', architecture: 'amd64' }, digest('2')],
    ['the same variant first', index(entry('1', { os: 'linux', architecture: 'arm64', variant: 'v7' }), entry('2', { os: 'linux', architecture: 'arm64', variant: 'v8' })), nodePlatform('arm64'), digest('2')],
    ['one naming no variant next', index(entry('1', { os: 'linux', architecture: 'arm64', variant: 'v7' }), entry('2', { os: 'linux', architecture: 'arm64' })), nodePlatform('arm64'), digest('2')],
    ['not another os', index(entry('1', { os: 'windows', architecture: 'amd64' })), nodePlatform('x64'), null],
    ['not an entry without a platform (an attestation)', index(entry('1')), nodePlatform('x64'), null],
  ])('matches %s', (_name, idx, platform, expected) => {
    expect(pickPlatform(idx, platform)?.digest ?? null).toBe(expected);
  });

  it("names this node's platform in OCI's words", () => {
    expect(nodePlatform('x64')).toEqual({ os: 'linux', architecture: 'amd64' });
    expect(nodePlatform('arm64')).toEqual({ os: 'linux', architecture: 'arm64', variant: 'v8' });
  });
});
