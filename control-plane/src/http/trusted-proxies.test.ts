import { describe, expect, it } from 'vitest';
import { ConfigError } from '@svc/shared';
import { loadControlPlaneConfig } from '../config.js';
import { trustedProxies } from './trusted-proxies.js';

describe('SVC_TRUST_PROXY', () => {
  it.each<[string, string[]]>([
    ['', []],
    ['false', []],
    ['10.0.0.0/8', ['10.0.0.0/8']],
    ['10.0.0.0/8, 192.168.1.10 ,2001:db8::/32', ['10.0.0.0/8', '192.168.1.10', '2001:db8::/32']],
    ['loopback,uniquelocal', ['loopback', 'uniquelocal']],
  ])('%j is the list %j', (env, expected) => {
    expect(trustedProxies(loadControlPlaneConfig({ SVC_TRUST_PROXY: env }).trustProxy)).toEqual(expected);
  });

  it.each<[string, RegExp]>([
    // The old boolean: it believed any client's X-Forwarded-For.
    ['true', /"true" would let every client choose its source address/],
    ['10.0.0.0/8,true', /"true" would let every client/],
    ['10.0.0.0/33', /"10\.0\.0\.0\/33" is not a CIDR/],
    ['lb.internal', /"lb\.internal" is not a CIDR/],
  ])('%j stops start-up', (env, message) => {
    expect(() => loadControlPlaneConfig({ SVC_TRUST_PROXY: env })).toThrow(ConfigError);
    expect(() => loadControlPlaneConfig({ SVC_TRUST_PROXY: env })).toThrow(message);
  });
});
