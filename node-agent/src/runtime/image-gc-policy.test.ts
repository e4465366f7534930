import { describe, expect, it } from 'vitest';
import { imagesToRemove, type PulledImage } from './image-gc-policy.js';

const GB = 1e9;
const disk = (usedPercent: number) => ({ usedBytes: usedPercent * 10 * GB, totalBytes: 1000 * GB });
const image = (ref: string, sizeGb: number, lastUsedMs: number, inUse = false): PulledImage => ({ ref, sizeBytes: sizeGb * GB, lastUsedMs, inUse });
const thresholds = { highPercent: 85, lowPercent: 80 };

const images = [image('recent', 30, 300), image('oldest', 20, 100), image('running', 100, 50, true), image('older', 40, 200)];

describe('imagesToRemove', () => {
  it.each([
    ['below the high mark: nothing', 84.9, []],
    ['at the high mark: the oldest unused images until under the low mark (50 GB to free)', 85, ['oldest', 'older']],
    ['far above: every unused image, never one in use', 99, ['oldest', 'older', 'recent']],
  ] as const)('%s', (_name, usedPercent, expected) => {
    expect(imagesToRemove(disk(usedPercent), images, thresholds)).toEqual(expected);
  });

  it('frees no more than needed: one image when one is enough', () => {
    expect(imagesToRemove(disk(86), [image('big', 100, 1), image('small', 1, 2)], thresholds)).toEqual(['big']);
  });

  it('removes nothing when only images in use are left, or the disk reads as empty', () => {
    expect(imagesToRemove(disk(99), [image('running', 100, 1, true)], thresholds)).toEqual([]);
    expect(imagesToRemove({ usedBytes: 0, totalBytes: 0 }, images, thresholds)).toEqual([]);
  });

  it('breaks a tie in last use by reference, so two agents agree on the order', () => {
    expect(imagesToRemove(disk(99), [image('b', 1, 5), image('a', 1, 5)], thresholds)).toEqual(['a', 'b']);
  });
});
