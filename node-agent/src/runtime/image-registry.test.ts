import { describe, expect, it } from 'vitest';
import { registryHost, registryOf, registryRefusal } from './image-registry.js';

describe('registryOf', () => {
  it.each([
    ['busybox', 'docker.io'],
    ['library/busybox:1', 'docker.io'],
    ['team/app@sha256:' + 'a'.repeat(64), 'docker.io'],
    ['ghcr.io/team/app:1', 'ghcr.io'],
    ['localhost/app', 'localhost'],
    ['localhost:5000/app:1', 'localhost:5000'],
    ['127.0.0.1:5000/svc/busybox:1', '127.0.0.1:5000'],
    ['Registry.Example.com/team/app', 'registry.example.com'],
    ['[::1]:5000/app', '[::1]:5000'],
    ['Team/app', 'team'],
  ])('%s comes from %s', (image, registry) => {
    expect(registryOf(image)).toBe(registry);
  });

  it.each([
    ['docker.io', 'docker.io'],
    ['127.0.0.1:5000', '127.0.0.1'],
    ['[::1]:5000', '::1'],
    ['[fd00::1]', 'fd00::1'],
  ])('the host of %s is %s', (registry, host) => {
    expect(registryHost(registry)).toBe(host);
  });
});

describe('registryRefusal', () => {
  const names: Record<string, string[]> = {
    'registry-1.example.com': ['203.0.113.1'],
    'ghcr.io': ['140.82.112.34'],
    'internal.example.com': ['140.82.112.35', '10.1.2.3'],
    'metadata.example.com': ['169.254.169.254'],
  };
  const policy = (allowed: string[] = []) => ({ allowed, resolve: async (host: string) => names[host] ?? [] });

  it.each([
    ['127.0.0.1:5000/svc/busybox:1', 'image registry 127.0.0.1:5000 is at a loopback address'],
    ['localhost:5000/svc/busybox:1', 'image registry localhost:5000 resolves to a loopback address'],
    ['10.0.0.5/team/app', 'image registry 10.0.0.5 is at a private address'],
    ['169.254.169.254/latest/app', 'image registry 169.254.169.254 is at a link-local address'],
    ['[::1]:5000/app', 'image registry [::1]:5000 is at a loopback address'],
    ['[::ffff:127.0.0.1]:5000/app', 'image registry [::ffff:127.0.0.1]:5000 is at a loopback address'],
    ['internal.example.com/team/app:1', 'image registry internal.example.com resolves to a private address'],
    ['metadata.example.com/app', 'image registry metadata.example.com resolves to a link-local address'],
  ])('refuses %s', async (image, why) => {
    expect(await registryRefusal(image, policy())).toBe(`${why}: instances pull only from registries on public addresses`);
  });

  it.each(['busybox', 'ghcr.io/team/app:1', 'unknown.example.com/app'])('lets %s through (public, or left to Docker when it resolves to nothing)', async (image) => {
    expect(await registryRefusal(image, policy())).toBeNull();
  });

  it("lets the operator's own registries through, by host and port or by host", async () => {
    expect(await registryRefusal('127.0.0.1:5000/svc/busybox:1', policy(['127.0.0.1:5000']))).toBeNull();
    expect(await registryRefusal('127.0.0.1:5001/svc/busybox:1', policy(['127.0.0.1:5000']))).toContain('loopback');
    // Another name for the same registry is another registry.
    expect(await registryRefusal('localhost:5000/svc/busybox:1', policy(['127.0.0.1:5000']))).toContain('loopback');
    expect(await registryRefusal('internal.example.com/team/app', policy(['internal.example.com']))).toBeNull();
  });

  it("refuses a registry of the node's own images, whatever its address", async () => {
    const own = { ...policy(), replicaOnly: ['internal.example.com', 'ghcr.io'] };
    for (const [image, registry] of [['internal.example.com/provider/vllm:1', 'internal.example.com'], ['ghcr.io/provider/vllm:1', 'ghcr.io']]) {
      expect(await registryRefusal(image!, own)).toBe(`image registry ${registry} holds this node's own images: instances pull from other registries`);
    }
    expect(await registryRefusal('ghcr.io/provider/vllm:1', policy())).toBeNull();
  });
});
