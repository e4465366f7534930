// How Docker reads an image reference, where that matters to what a tenant can run. Docker
// takes a name it does not know as a prefix of a local image's ID (`cd6c` runs the image
// whose ID starts so, as does `sha256:<id>`), and runs whatever a local tag points at
// however the image got there. On a node that holds the provider's own images (a replica's
// model server from a private registry, one loaded with `docker load`), an instance naming
// an ID prefix, or the tag such an image carries, would run it: the agent names images to
// Docker only in a form it cannot read as an ID, an instance's image is always pulled, and
// one whose content the node also holds under another repository's name is refused (a
// manifest can name an image's ID, and Docker then asks for nothing more). References
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
 * How many of an image's names (tags and digests) are of another repository than `ref`'s.
 * Docker gives one image every name it was pulled, pushed or tagged under; an instance's
 * image that also carries another repository's name is content the node got elsewhere
 * (the provider's image, one pulled with credentials) that the instance's registry only
 * named by its digest.
 */
export function namesOfOtherRepositories(image: { RepoTags?: readonly string[] | null; RepoDigests?: readonly string[] | null }, ref: string): number {
  const repository = repositoryOf(ref);
  return [...(image.RepoTags ?? []), ...(image.RepoDigests ?? [])].filter((name) => name !== '<none>:<none>' && name !== '<none>@<none>' && repositoryOf(name) !== repository).length;
}
