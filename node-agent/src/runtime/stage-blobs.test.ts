import { describe, expect, it } from 'vitest';
import type { Descriptor } from './image-manifest.js';
import { reserved, stageBlobs, stagingRefusal, StagingStopped, STAGING_RESERVE_BYTES, type StagingProgress } from './stage-blobs.js';

const GIB = 1024 ** 3;
const blob = (n: number, size: number): Descriptor => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: `sha256:${String(n).padStart(64, '0')}`, size });

describe('stagingRefusal', () => {
  it.each([
    { name: 'nothing to stage', bytes: 0, free: 0, pending: 0, refused: false },
    { name: 'fits with the spare left', bytes: 4 * GIB, free: 5 * GIB, pending: 0, refused: false },
    { name: 'would eat into the spare', bytes: 4 * GIB + 1, free: 5 * GIB, pending: 0, refused: true },
    { name: 'fits alone, not beside a staging under way', bytes: 4 * GIB, free: 9 * GIB, pending: 5 * GIB, refused: true },
    { name: 'beside a staging under way, both fit', bytes: 3 * GIB, free: 9 * GIB, pending: 5 * GIB, refused: false },
    { name: 'a disk already past its spare', bytes: 1, free: GIB / 2, pending: 0, refused: true },
  ])('$name', ({ bytes, free, pending, refused }) => {
    expect(stagingRefusal(bytes, free, pending) !== null).toBe(refused);
  });

  it("says what it needs, not the node's free space", () => {
    expect(stagingRefusal(10 * GIB, 8 * GIB, 2 * GIB)).toBe("this node has no room to stage the image's blobs new to it (10.0 GiB) now");
  });

  it('counts a staging under way for at most what it may write soon, not the size its manifest claims', () => {
    expect(reserved(70 * GIB)).toBe(STAGING_RESERVE_BYTES);
    expect(reserved(100)).toBe(100);
    // Another pull's 70 GiB claim, trickled, leaves room for an honest 4 MiB image.
    expect(stagingRefusal(4 * 1024 * 1024, 71 * GIB, reserved(70 * GIB))).toBeNull();
  });
});

describe('stageBlobs', () => {
  const deadline = { stallMs: 60_000, timeoutMs: 600_000 };

  it('fetches every blob, three at a time, reporting the bytes of all as they move', async () => {
    let running = 0;
    let most = 0;
    const staged: string[] = [];
    const seen: StagingProgress[] = [];
    const blobs = [blob(1, 100), blob(2, 200), blob(3, 300), blob(4, 400), blob(5, 500)];
    await stageBlobs(
      {
        stage: async (b, moved) => {
          running += 1;
          most = Math.max(most, running);
          await new Promise((resolve) => setTimeout(resolve, 5));
          moved?.(b.size / 2);
          await new Promise((resolve) => setTimeout(resolve, 5));
          moved?.(b.size);
          staged.push(b.digest);
          running -= 1;
        },
      },
      blobs,
      { deadline, report: (p) => seen.push(p) },
    );
    expect(staged.sort()).toEqual(blobs.map((b) => b.digest).sort());
    expect(most).toBe(3);
    expect(seen.every((p) => p.total === 1500)).toBe(true);
    expect(seen.at(-1)!.bytes).toBe(1500);
    for (let i = 1; i < seen.length; i++) expect(seen[i]!.bytes).toBeGreaterThanOrEqual(seen[i - 1]!.bytes);
  });

  it("stops the others' downloads at the first failure, and throws it", async () => {
    const aborted: string[] = [];
    const failure = new Error('the registry does not serve blob 1');
    const staging = stageBlobs(
      {
        stage: (b, _moved, signal) =>
          b.digest === blob(1, 1).digest
            ? Promise.reject(failure)
            : new Promise<void>((_resolve, reject) =>
                // A download takes a moment to close once told to stop.
                signal!.addEventListener('abort', () =>
                  setTimeout(() => {
                    aborted.push(b.digest);
                    reject(signal!.reason as Error);
                  }, 20),
                ),
              ),
      },
      [blob(1, 1), blob(2, 2), blob(3, 3)],
      { deadline, report: () => undefined },
    );
    const endedWhenThrown = await staging.then(() => [], (err: unknown) => (expect(err).toBe(failure), [...aborted]));
    // Thrown once the others had ended, not before.
    expect(endedWhenThrown.sort()).toEqual([blob(2, 2).digest, blob(3, 3).digest]);
  });

  it('gives up by the stall rule when the blobs stop moving', async () => {
    const staging = stageBlobs(
      { stage: (_b, _moved, signal) => new Promise<void>((_resolve, reject) => signal!.addEventListener('abort', () => reject(signal!.reason as Error))) },
      [blob(1, 10)],
      { deadline: { stallMs: 40, timeoutMs: 600_000 }, report: () => undefined },
    );
    await expect(staging).rejects.toBeInstanceOf(StagingStopped);
    await expect(staging).rejects.toThrow('it moved less than 1 MiB in 0.04 s (the registry stopped sending)');
  });
});
