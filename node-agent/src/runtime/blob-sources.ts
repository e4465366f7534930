// Which repositories have served the node which blobs. dockerd fetches only the blobs it
// lacks: an image config already on the node, or a layer it already holds, is taken as
// it is, whoever's image brought it. A registry that names the digests of the provider's
// image (or of another tenant's private one) without having them would get that content.
// So every blob of an instance's image must come from the instance's repository: recorded
// here from an earlier pull, or else fetched from that repository and checked (staged)
// before dockerd is asked for the image (image-pulls.ts).
// Kept in `$SVC_AGENT_DATA_DIR/blob-sources.json` (written whole), so a restarted agent does
// not fetch its images' layers again to check them.
import { readDataFile, writeDataFile } from '../config/data-file.js';
import { DIGEST_SHAPE } from './image-manifest.js';

/** Digests kept in all; the repositories recorded longest ago go first past it. */
export const MAX_RECORDED_BLOBS = 100_000;

export class BlobSources {
  /** Repository (`registry/path`) to the digests it served; in the order last recorded. */
  private readonly byRepository = new Map<string, Set<string>>();
  private count = 0;

  /** `file` undefined: in memory only. */
  constructor(
    private readonly file?: string,
    private readonly max = MAX_RECORDED_BLOBS,
  ) {
    if (!file) return;
    for (const [repository, digests] of Object.entries(readDataFile(file))) {
      if (!Array.isArray(digests)) continue;
      const valid = digests.filter((digest): digest is string => typeof digest === 'string' && DIGEST_SHAPE.test(digest));
      this.byRepository.set(repository, new Set(valid));
      this.count += valid.length;
    }
  }

  has(repository: string, digest: string): boolean {
    return this.byRepository.get(repository)?.has(digest) ?? false;
  }

  /** `repository` served `digests` (a pull that succeeded, or blobs checked). */
  record(repository: string, digests: Iterable<string>): void {
    const known = this.byRepository.get(repository) ?? new Set<string>();
    this.byRepository.delete(repository);
    this.byRepository.set(repository, known);
    let added = false;
    for (const digest of digests) {
      if (known.has(digest)) continue;
      known.add(digest);
      this.count += 1;
      added = true;
    }
    for (const [oldest, digestsOfOldest] of this.byRepository) {
      if (this.count <= this.max || oldest === repository) break;
      this.byRepository.delete(oldest);
      this.count -= digestsOfOldest.size;
    }
    if (added && this.file) writeDataFile(this.file, new Map([...this.byRepository].map(([name, set]) => [name, [...set]])));
  }
}
