// Docker reads some image references as image IDs, not repositories: `<algorithm>:<hex>`
// and 64 hex digits name a local image by its ID, whatever registry it came from (and a
// name it does not know, as a prefix of an ID: see the agent's image-reference.ts). A
// tenant's image is a repository; the control plane refuses these at the API and the
// agent again before Docker sees them.

const ID_SHAPE = /^(?:(?:sha256|sha384|sha512):[0-9a-f]*|[0-9a-f]{64})$/i;

/** Why `ref` would be read as an image ID rather than a repository, or null when it is not. */
export function imageIdProblem(ref: string): string | null {
  return ID_SHAPE.test(ref) ? `"${ref}" names an image by its ID: name the repository, with a tag or a digest` : null;
}
