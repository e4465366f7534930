// How Docker reads an image reference, where that matters to what a tenant can run. Docker
// takes a name it does not know as a prefix of a local image's ID (`cd6c` runs the image
// whose ID starts so, as does `sha256:<id>`), and runs whatever a local tag points at
// however the image got there. On a node that holds the provider's own images (a replica's
// model server from a private registry, one loaded with `docker load`), an instance naming
// an ID prefix, or the tag such an image carries, would run it: the agent names images to
// Docker only in a form it cannot read as an ID, and an instance uses a present image only
// when it was pulled from (or pushed to) the repository the instance names. References
// Docker always reads as IDs are refused (@svc/shared/image-id).
import { DEFAULT_REGISTRY, registryOf } from './image-registry.js';

/**
 * `busybox` and `busybox:latest` are one image to Docker. The tagged form is also the one
 * Docker never reads as an ID prefix, so it is the form the agent gives Docker.
 */
export const withDefaultTag = (ref: string): string => {
  const name = ref.slice(ref.lastIndexOf('/') + 1);
  return name.includes(':') || name.includes('@') ? ref : `${ref}:latest`;
};

/** The repository `ref` names, as Docker normalizes it: `busybox:1` is `docker.io/library/busybox`. */
export function repositoryOf(ref: string): string {
  const registry = registryOf(ref);
  const slash = ref.indexOf('/');
  const isDefault = registry === DEFAULT_REGISTRY || registry === 'index.docker.io';
  // Docker Hub names are written without the registry, or with it (docker.io/…, index.docker.io/…).
  const explicit = slash >= 0 && ref.slice(0, slash).toLowerCase() === registry;
  let path = explicit ? ref.slice(slash + 1) : ref;
  const at = path.indexOf('@');
  if (at >= 0) path = path.slice(0, at);
  const colon = path.lastIndexOf(':');
  if (colon > path.lastIndexOf('/')) path = path.slice(0, colon);
  if (isDefault) return `${DEFAULT_REGISTRY}/${path.includes('/') ? path : `library/${path}`}`;
  return `${registry}/${path}`;
}

/**
 * Whether an image with these RepoDigests came from `ref`'s repository: Docker records a
 * repository's digest when it pulls an image from it or pushes one to it, never for a tag
 * made locally.
 */
export function cameFromRepository(repoDigests: readonly string[] | null | undefined, ref: string): boolean {
  const repository = repositoryOf(ref);
  return (repoDigests ?? []).some((digested) => repositoryOf(digested) === repository);
}
