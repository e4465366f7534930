import { describe, expect, it } from 'vitest';
import { imageIdProblem } from './image-id.js';

const ID = 'cd6c63ac89d52ea7e503073ce5f0b817b64eeee9c08da53cbcfd430a7021fb37';

describe('imageIdProblem', () => {
  it.each([`sha256:${ID}`, 'sha256:cd6c', 'SHA256:cd6c', `sha512:${ID}${ID}`, ID])('%s is an image ID', (ref) => {
    expect(imageIdProblem(ref)).toMatch(/names an image by its ID/);
  });

  it.each(['cd6c', 'busybox', `busybox@sha256:${ID}`, `127.0.0.1:5000/svc/sha256:${ID.slice(0, 20)}`, `${ID}0`])('%s is a repository', (ref) => {
    expect(imageIdProblem(ref)).toBeNull();
  });
});
