import { describe, expect, it } from 'vitest';
import { namesOfOtherRepositories, repositoryOf, withDefaultTag } from './image-reference.js';

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

describe('namesOfOtherRepositories', () => {
  it.each<[string, { RepoTags?: string[] | null; RepoDigests?: string[] | null }, string, number]>([
    ['tags and digests of the named repository, however written', { RepoTags: ['busybox:1', 'docker.io/library/busybox:latest'], RepoDigests: [`busybox@sha256:${ID}`] }, 'docker.io/library/busybox:1', 0],
    ['nothing recorded', { RepoTags: null, RepoDigests: null }, 'busybox:latest', 0],
    ["the provider's tag beside the tenant's", { RepoTags: ['vllm-internal:latest', '127.0.0.1:9/tenant/x:1'], RepoDigests: [`127.0.0.1:9/tenant/x@sha256:${ID}`] }, '127.0.0.1:9/tenant/x:1', 1],
    ['a private registry pulled with credentials', { RepoTags: ['10.0.0.5:5000/provider/vllm:1'], RepoDigests: [`10.0.0.5:5000/provider/vllm@sha256:${ID}`] }, 'vllm:1', 2],
    ['a sibling repository of the same registry', { RepoTags: ['127.0.0.1:5000/svc/busybox:1'], RepoDigests: [] }, '127.0.0.1:5000/svc/busybox-other:1', 1],
    ['untagged leftovers', { RepoTags: ['<none>:<none>'], RepoDigests: ['<none>@<none>'] }, 'x:1', 0],
  ])('%s', (_name, image, ref, expected) => {
    expect(namesOfOtherRepositories(image, ref)).toBe(expected);
  });
});
