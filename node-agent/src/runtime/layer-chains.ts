// Which of an image's layers dockerd already has, told from what Docker's API shows: every
// local image's layers (RootFS.Layers, uncompressed diff IDs, bottom first). dockerd reuses
// a layer only as part of a chain (the layers below it the same), so a layer is present when
// some local image holds its chain, named by Docker's chain ID. Pure.
import { createHash } from 'node:crypto';
import type { Descriptor } from './image-manifest.js';

/** Docker's chain IDs of a stack of layers: the first its diff ID, each next sha256("<below> <diff ID>"). */
export function chainIds(diffIds: readonly string[]): string[] {
  const chains: string[] = [];
  for (const diffId of diffIds) {
    const below = chains.at(-1);
    chains.push(below === undefined ? diffId : `sha256:${createHash('sha256').update(`${below} ${diffId}`).digest('hex')}`);
  }
  return chains;
}

/** The diff IDs an image config lists (`rootfs.diff_ids`), or null when it lists none it could mean. */
export function diffIdsOf(config: unknown): string[] | null {
  const ids = (config as { rootfs?: { diff_ids?: unknown } } | null)?.rootfs?.diff_ids;
  if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string' && /^sha256:[a-f0-9]{64}$/.test(id))) return null;
  return ids as string[];
}

/**
 * The layers (compressed, as the manifest lists them) dockerd will ask for: those whose
 * chain no local image holds. Every layer when the config's diff IDs do not match the
 * manifest's layers one for one (dockerd will refuse the image anyway).
 */
export function layersToFetch(layers: readonly Descriptor[], diffIds: readonly string[] | null, present: ReadonlySet<string>): Descriptor[] {
  if (!diffIds || diffIds.length !== layers.length) return [...layers];
  const chains = chainIds(diffIds);
  return layers.filter((_layer, i) => !present.has(chains[i]!));
}
