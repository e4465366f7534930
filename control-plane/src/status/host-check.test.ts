import { describe, expect, it } from 'vitest';
import { hostAllowed, hostOf } from './host-check.js';

describe("the operators' listener Host check", () => {
  it.each([
    ['127.0.0.1:9400', [], true],
    ['10.1.2.3', [], true],
    ['[::1]:9400', [], true],
    ['localhost:9400', [], true],
    ['LOCALHOST', [], true],
    ['ops.internal:9400', ['ops.internal'], true],
    ['OPS.internal.', ['ops.internal'], true],
    ['ops.internal:9400', [], false],
    ['attacker.example:9400', ['ops.internal'], false],
    ['127.0.0.1.attacker.example', [], false],
    ['localhost.attacker.example', [], false],
    ['', [], false],
    [undefined, [], false],
    ['a:b:c', [], false],
    ['ops.internal:9400@evil', ['ops.internal'], false],
  ] as const)('Host %j with names %j: %s', (host, names, allowed) => expect(hostAllowed(host, names)).toBe(allowed));

  it('reads the host without port or brackets', () => {
    expect(hostOf('[::1]:80')).toBe('::1');
    expect(hostOf('Example.COM:8080')).toBe('example.com');
  });
});
