import { describe, expect, it } from 'vitest';
import { envAccepted, execCommand, forwardTarget, shellCommand, signalName, withTerminalSize } from './session-request.js';

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
