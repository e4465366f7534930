// How Docker reads an image reference, where that matters to what a tenant can run. Docker
// takes a name it does not know as a prefix of a local image's ID (`cd6c` runs the image
// whose ID starts so, as does `sha256:<id>`), and runs whatever a local tag points at
// however the image got there. On a node that holds the provider's own images (a replica's
// model server from a private registry, one loaded with `docker load`), an instance naming
// an ID prefix, or the tag such an image carries, would run it: the agent names images to
// Docker only in a form it cannot read as an ID, and an instance's image is always pulled,
// each of its blobs proven to come from its repository (blob-sources.ts). References
// Docker always reads as IDs are refused (@svc/shared/image-id).

/**
 * `busybox` and `busybox:latest` are one image to Docker. The tagged form is also the one
 * Docker never reads as an ID prefix, so it is the form the agent gives Docker.
 */
export const withDefaultTag = (ref: string): string => {
  const name = ref.slice(ref.lastIndexOf('/') + 1);
  return name.includes(':') || name.includes('@') ? ref : `${ref}:latest`;
};

/**
 * The name an instance's image carries on the node once pulled through the registry front
 * (registry-front.ts): the reference itself when it has a tag; for one pinned by digest,
 * which Docker cannot give an image as a name, its repository tagged `sha256-<hex>`.
 */
export function localImageName(ref: string): string {
  const at = ref.indexOf('@');
  if (at < 0) return ref;
  let name = ref.slice(0, at);
  const colon = name.lastIndexOf(':');
  if (colon > name.lastIndexOf('/')) name = name.slice(0, colon);
  return `${name}:${ref.slice(at + 1).replace(':', '-')}`;
}
