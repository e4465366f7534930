import { describe, expect, it } from 'vitest';
import { clampTerminal, envAccepted, execCommand, forwardTarget, shellCommand, signalName, withTerminalSize } from './session-request.js';

describe('session requests', () => {
  it('passes commands through the shell and prefers bash for interactive shells', () => {
    expect(execCommand('echo $HOME; exit 3')).toEqual(['/bin/sh', '-c', 'echo $HOME; exit 3']);
    expect(shellCommand(true)).toEqual(['/bin/bash']);
    expect(shellCommand(false)).toEqual(['/bin/sh']);
  });

  it('sizes the terminal before the command runs', () => {
    expect(withTerminalSize(['/bin/sh', '-c', 'stty size'], 33, 101)).toEqual(['/bin/sh', '-c', 'stty rows 33 cols 101 2>/dev/null; exec "$@"', 'sh', '/bin/sh', '-c', 'stty size']);
  });

  it('accepts environment variables with proper names only', () => {
    expect(envAccepted('LANG', 'C.UTF-8')).toBe(true);
    expect(envAccepted('MY_VAR2', '')).toBe(true);
    expect(envAccepted('2BAD', 'x')).toBe(false);
    expect(envAccepted('A=B', 'x')).toBe(false);
    expect(envAccepted('A', 'nul\0byte')).toBe(false);
  });

  it.each([
    [[40, 132], { rows: 40, cols: 132 }],
    [[5000, 100_000], { rows: 1000, cols: 1000 }],
    [[0, 0], { rows: 24, cols: 80 }],
    [[-3, 1.5], { rows: 24, cols: 80 }],
    [[Number.NaN, 2 ** 32], { rows: 24, cols: 1000 }],
  ])('cuts a terminal of %j to a sane size', ([rows, cols], size) => {
    expect(clampTerminal(rows!, cols!, 1000)).toEqual(size);
  });

  it('maps SSH signal names', () => {
    expect(signalName('INT')).toBe('SIGINT');
    expect(signalName('SIGTERM')).toBe('SIGTERM');
    expect(signalName('NOPE')).toBeUndefined();
  });

  it('forwards only to the container itself', () => {
    const ip = '172.17.0.5';
    expect(forwardTarget('localhost', ip)).toBe(ip);
    expect(forwardTarget('127.0.0.1', ip)).toBe(ip);
    expect(forwardTarget('[::1]', ip)).toBe(ip);
    expect(forwardTarget(ip, ip)).toBe(ip);
    expect(forwardTarget('172.17.0.1', ip)).toBeUndefined();
    expect(forwardTarget('169.254.169.254', ip)).toBeUndefined();
    expect(forwardTarget('example.com', ip)).toBeUndefined();
    expect(forwardTarget('localhost', null)).toBeUndefined();
  });
});
