import { describe, expect, it } from 'vitest';
import { localImageName, withDefaultTag } from './image-reference.js';

const ID = 'cd6c63ac89d52ea7e503073ce5f0b817b64eeee9c08da53cbcfd430a7021fb37';

describe('withDefaultTag', () => {
  it('adds :latest only where neither a tag nor a digest is given', () => {
    expect(withDefaultTag('busybox')).toBe('busybox:latest');
    expect(withDefaultTag('cd6c')).toBe('cd6c:latest');
    expect(withDefaultTag('127.0.0.1:5000/svc/busybox')).toBe('127.0.0.1:5000/svc/busybox:latest');
    expect(withDefaultTag('127.0.0.1:5000/svc/busybox:1')).toBe('127.0.0.1:5000/svc/busybox:1');
    expect(withDefaultTag('svc/busybox@sha256:abc')).toBe('svc/busybox@sha256:abc');
  });
});

describe('localImageName', () => {
  it.each([
    ['127.0.0.1:5000/svc/busybox:1', '127.0.0.1:5000/svc/busybox:1'],
    ['busybox:latest', 'busybox:latest'],
    [`team/app@sha256:${ID}`, `team/app:sha256-${ID}`],
    [`team/app:1@sha256:${ID}`, `team/app:sha256-${ID}`],
    [`localhost:5000/app@sha256:${ID}`, `localhost:5000/app:sha256-${ID}`],
  ])('%s is %s on the node', (ref, local) => {
    expect(localImageName(ref)).toBe(local);
  });
});
