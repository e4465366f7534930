import { describe, expect, it } from 'vitest';
import { isInsecureRegistry, locate, parseChallenge } from './registry-client.js';

const ID = 'cd6c63ac89d52ea7e503073ce5f0b817b64eeee9c08da53cbcfd430a7021fb37';

describe('locate', () => {
  it.each([
    ['busybox:latest', 'docker.io', 'registry-1.docker.io', 'library/busybox', 'latest'],
    ['busybox:1.36', 'docker.io', 'registry-1.docker.io', 'library/busybox', '1.36'],
    ['library/busybox:1', 'docker.io', 'registry-1.docker.io', 'library/busybox', '1'],
    ['docker.io/busybox:1', 'docker.io', 'registry-1.docker.io', 'library/busybox', '1'],
    ['index.docker.io/team/app:2', 'docker.io', 'registry-1.docker.io', 'team/app', '2'],
    [`team/app@sha256:${ID}`, 'docker.io', 'registry-1.docker.io', 'team/app', `sha256:${ID}`],
    [`team/app:1@sha256:${ID}`, 'docker.io', 'registry-1.docker.io', 'team/app', `sha256:${ID}`],
    ['127.0.0.1:5000/svc/busybox:1', '127.0.0.1:5000', '127.0.0.1:5000', 'svc/busybox', '1'],
    ['localhost:5000/app:latest', 'localhost:5000', 'localhost:5000', 'app', 'latest'],
    ['Registry.Example.com/team/app:2', 'registry.example.com', 'registry.example.com', 'team/app', '2'],
    ['[::1]:5000/app:1', '[::1]:5000', '[::1]:5000', 'app', '1'],
  ])('%s', (ref, registry, endpoint, repository, reference) => {
    expect(locate(ref)).toEqual({ registry, endpoint, repository, reference });
  });
});

describe('parseChallenge', () => {
  it.each([
    ['Bearer realm="https://auth.docker.io/token",service="registry.docker.io"', { scheme: 'bearer', params: { realm: 'https://auth.docker.io/token', service: 'registry.docker.io' } }],
    ['Bearer realm="https://ghcr.io/token",service="ghcr.io",scope="repository:user/image:pull"', { scheme: 'bearer', params: { realm: 'https://ghcr.io/token', service: 'ghcr.io', scope: 'repository:user/image:pull' } }],
    ['Basic realm="Registry Realm"', { scheme: 'basic', params: { realm: 'Registry Realm' } }],
    ['bearer Realm=https://x/token, Service=x', { scheme: 'bearer', params: { realm: 'https://x/token', service: 'x' } }],
    ['Bearer realm="a \\"quoted\\" realm"', { scheme: 'bearer', params: { realm: 'a "quoted" realm' } }],
    ['Basic realm="r", Bearer realm="https://x/token",service="x"', { scheme: 'bearer', params: { realm: 'https://x/token', service: 'x' } }],
    ['Bearer realm="https://x/token" , service = "x"', { scheme: 'bearer', params: { realm: 'https://x/token', service: 'x' } }],
    ['', null],
    ['  ', null],
  ])('%s', (header, challenge) => {
    expect(parseChallenge(header)).toEqual(challenge);
  });

  it('takes Bearer from several header lines, Basic when that is all there is', () => {
    expect(parseChallenge(['Basic realm="r"', 'Bearer realm="https://x/token"'])).toEqual({ scheme: 'bearer', params: { realm: 'https://x/token' } });
    expect(parseChallenge(['Basic realm="r"'])).toEqual({ scheme: 'basic', params: { realm: 'r' } });
    expect(parseChallenge(undefined)).toBeNull();
  });

  it('reads at most 4 KiB of a header (a registry could send 16 KiB of one parameter): what lies past it is not seen', () => {
    const padded = `Bearer pad="${'a'.repeat(5_000)}", realm="https://x/token"`;
    expect(parseChallenge(padded)?.params.realm).toBeUndefined();
    expect(parseChallenge(`Bearer realm="https://x/token", ${'a'.repeat(16_000)}`)?.params.realm).toBe('https://x/token');
  });
});

describe('isInsecureRegistry', () => {
  const config = { IndexConfigs: { 'docker.io': { Secure: true }, 'plain.example:5000': { Secure: false } }, InsecureRegistryCIDRs: ['127.0.0.0/8', '10.9.0.0/16'] };
  it.each<[string, string[], boolean]>([
    ['127.0.0.1:5000', ['127.0.0.1'], true],
    ['localhost:5000', ['127.0.0.1'], true],
    ['registry.internal', ['10.9.3.4'], true],
    ['registry.internal', ['10.8.3.4'], false],
    ['plain.example:5000', ['203.0.113.5'], true],
    ['docker.io', ['127.0.0.1'], false],
    ['ghcr.io', ['140.82.112.33'], false],
    ['v6.example', ['::ffff:127.0.0.1'], true],
    ['junk', ['not-an-address'], false],
  ])('%s at %j: %s', (registry, addresses, insecure) => {
    expect(isInsecureRegistry(registry, config, addresses)).toBe(insecure);
  });

  it('reads a CIDR it cannot parse as none', () => {
    expect(isInsecureRegistry('x', { InsecureRegistryCIDRs: ['nonsense'] }, ['127.0.0.1'])).toBe(false);
    expect(isInsecureRegistry('x', {}, ['127.0.0.1'])).toBe(false);
  });
});
