import { describe, expect, it } from 'vitest';
import { cameFromRepository, repositoryOf, withDefaultTag } from './image-reference.js';

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

describe('repositoryOf', () => {
  it.each([
    ['busybox', 'docker.io/library/busybox'],
    ['busybox:1.36', 'docker.io/library/busybox'],
    ['library/busybox', 'docker.io/library/busybox'],
    ['docker.io/busybox', 'docker.io/library/busybox'],
    ['index.docker.io/library/busybox:1', 'docker.io/library/busybox'],
    [`team/app@sha256:${ID}`, 'docker.io/team/app'],
    [`team/app:1@sha256:${ID}`, 'docker.io/team/app'],
    ['127.0.0.1:5000/svc/busybox:1', '127.0.0.1:5000/svc/busybox'],
    ['localhost:5000/app', 'localhost:5000/app'],
    ['Registry.Example.com/team/app:2', 'registry.example.com/team/app'],
    ['[::1]:5000/app:1', '[::1]:5000/app'],
  ])('%s is in %s', (ref, repository) => {
    expect(repositoryOf(ref)).toBe(repository);
  });
});

describe('cameFromRepository', () => {
  it('is true when a digest of the named repository is recorded, however either is written', () => {
    expect(cameFromRepository([`busybox@sha256:${ID}`], 'docker.io/library/busybox:latest')).toBe(true);
    expect(cameFromRepository([`other@sha256:${ID}`, `127.0.0.1:5000/svc/busybox@sha256:${ID}`], '127.0.0.1:5000/svc/busybox:1')).toBe(true);
  });

  it('is false for an image tagged or loaded on the node, or pulled from another repository', () => {
    expect(cameFromRepository([], 'busybox:latest')).toBe(false);
    expect(cameFromRepository(null, 'busybox:latest')).toBe(false);
    expect(cameFromRepository([`10.0.0.5:5000/provider/vllm@sha256:${ID}`], 'vllm:latest')).toBe(false);
    expect(cameFromRepository([`127.0.0.1:5000/svc/busybox@sha256:${ID}`], '127.0.0.1:5000/svc/busybox-other:1')).toBe(false);
  });
});
