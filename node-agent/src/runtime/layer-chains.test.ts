import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { Descriptor } from './image-manifest.js';
import { chainIds, diffIdsOf, layersToFetch } from './layer-chains.js';

const id = (n: number) => `sha256:${String(n).padStart(64, '0')}`;
const layer = (n: number): Descriptor => ({ mediaType: 'application/vnd.docker.image.rootfs.diff.tar.gzip', digest: `sha256:${String(n).padStart(64, 'f')}`, size: n });

describe('chainIds', () => {
  it("names a stack as Docker does: the first by its diff ID, each next by sha256 of the one below and its own", () => {
    const second = `sha256:${createHash('sha256').update(`${id(1)} ${id(2)}`).digest('hex')}`;
    const third = `sha256:${createHash('sha256').update(`${second} ${id(3)}`).digest('hex')}`;
    expect(chainIds([id(1), id(2), id(3)])).toEqual([id(1), second, third]);
    expect(chainIds([])).toEqual([]);
  });

  it('names the same layer on another base differently', () => {
    expect(chainIds([id(9), id(2)])[1]).not.toBe(chainIds([id(1), id(2)])[1]);
  });
});

describe('diffIdsOf', () => {
  it.each([
    ['a config', { rootfs: { type: 'layers', diff_ids: [id(1), id(2)] } }, [id(1), id(2)]],
    ['no rootfs', {}, null],
    ['a diff ID that is not a sha256 digest', { rootfs: { diff_ids: [id(1), 'sha256:zz'] } }, null],
    ['diff_ids not a list', { rootfs: { diff_ids: 'x' } }, null],
    ['null', null, null],
  ])('%s', (_name, config, want) => {
    expect(diffIdsOf(config)).toEqual(want);
  });
});

describe('layersToFetch', () => {
  const layers = [layer(1), layer(2), layer(3)];
  const diffIds = [id(1), id(2), id(3)];
  const chains = chainIds(diffIds);

  it.each([
    ['nothing on the node: all', new Set<string>(), [1, 2, 3]],
    ['the base image on the node: the layers above it', new Set([chains[0]!]), [2, 3]],
    ['an image holding the whole stack: none', new Set(chains), []],
    ['a layer present only on another base is not reused', new Set([chainIds([id(7), id(2)])[1]!]), [1, 2, 3]],
  ])('%s', (_name, present, want) => {
    expect(layersToFetch(layers, diffIds, present).map((l) => l.size)).toEqual(want);
  });

  it('fetches every layer when the config does not list one diff ID per layer', () => {
    expect(layersToFetch(layers, [id(1)], new Set(chains))).toEqual(layers);
    expect(layersToFetch(layers, null, new Set(chains))).toEqual(layers);
  });
});
