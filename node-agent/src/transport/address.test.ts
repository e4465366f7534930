import { describe, expect, it } from 'vitest';
import { isLoopbackTarget, parseControlPlaneTargets, targetHost, targetPort } from './address.js';

describe('targets', () => {
  it.each([
    ['127.0.0.1:7070', '127.0.0.1', true],
    ['127.3.4.5:7070', '127.3.4.5', true],
    ['localhost:7070', 'localhost', true],
    ['[::1]:7070', '::1', true],
    ['dns:///localhost:7070', 'localhost', true],
    ['10.0.0.5:7070', '10.0.0.5', false],
    ['cp.example.com:443', 'cp.example.com', false],
    ['localhost.example.com:7070', 'localhost.example.com', false],
    ['[2001:db8::1]:7070', '2001:db8::1', false],
  ])('%s has host %s, loopback %s', (target, host, loopback) => {
    expect(targetHost(target)).toBe(host);
    expect(targetPort(target)).toBe(Number(target.split(':').at(-1)));
    expect(isLoopbackTarget(target)).toBe(loopback);
  });
});

describe('parseControlPlaneTargets', () => {
  it.each([
    ['127.0.0.1:7070', ['127.0.0.1:7070']],
    ['cp1.example.com:7070,cp2.example.com:7070', ['cp1.example.com:7070', 'cp2.example.com:7070']],
    [' cp1:7070 , [2001:db8::1]:7070 ', ['cp1:7070', '[2001:db8::1]:7070']],
    ['dns:///cp.example.com:7070', ['dns:///cp.example.com:7070']],
  ])('%s -> %j', (value, targets) => {
    expect(parseControlPlaneTargets(value)).toEqual(targets);
  });

  it.each([
    ['cp1:7070,,cp2:7070', /empty address/],
    ['cp1:7070,', /empty address/],
    ['cp1:7070,cp2', /"cp2" has no port/],
  ])('refuses %s', (value, problem) => {
    expect(() => parseControlPlaneTargets(value)).toThrow(problem);
  });
});
