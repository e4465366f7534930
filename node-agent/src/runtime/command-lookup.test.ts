import { describe, expect, it } from 'vitest';
import { commandBehindLimiter, isExecutable, lookUpProgram, pathOf, programCandidates, type StatResult } from './command-lookup.js';

const DIR = 2 ** 31;
const SYMLINK = 2 ** 27;

describe('programCandidates (execvp order)', () => {
  it.each([
    ['a bare name along PATH', 'python', '/usr/local/bin:/usr/bin', '/app', ['/usr/local/bin/python', '/usr/bin/python']],
    ['no PATH: glibc default', 'sh', undefined, '/', ['/bin/sh', '/usr/bin/sh']],
    ['an empty PATH entry is the working directory', 'run', ':/bin', '/app', ['/app/run', '/bin/run']],
    ['a relative PATH entry is under the working directory', 'run', 'bin', '/app', ['/app/bin/run']],
    ['an absolute path as is', '/opt/x/run', '/bin', '/app', ['/opt/x/run']],
    ['a relative path with a slash: working directory, no search', './run.sh', '/bin', '/app', ['/app/./run.sh']],
    ['no working directory is /', 'sub/run', '/bin', '', ['/sub/run']],
    ['a trailing slash on a PATH entry', 'x', '/opt/bin/', '/', ['/opt/bin/x']],
    ['an empty program', '', '/bin', '/', []],
  ])('%s', (_, program, path, workdir, expected) => {
    expect(programCandidates(program, path, workdir)).toEqual(expected);
  });
});

describe('commandBehindLimiter', () => {
  it.each([
    ['entrypoint and cmd after --', ['/.svc/log-init', '1', '2', '--', '/entry.sh'], ['serve'], ['/entry.sh', 'serve']],
    ['cmd only', ['/.svc/log-init', '1', '2', '--'], ['python', 'x.py'], ['python', 'x.py']],
    ['not behind the limiter', ['/entry.sh'], ['serve'], null],
    ['no separator', ['/.svc/log-init', '1'], ['x'], null],
  ])('%s', (_, entrypoint, cmd, expected) => {
    expect(commandBehindLimiter(entrypoint, cmd, '/.svc/log-init')).toEqual(expected);
  });
});

describe('pathOf / isExecutable', () => {
  it('reads PATH from the environment, undefined when absent', () => {
    expect(pathOf(['HOME=/root', 'PATH=/a:/b', 'X=PATH=/c'])).toBe('/a:/b');
    expect(pathOf(['HOME=/root'])).toBeUndefined();
    expect(pathOf(['PATH='])).toBe('');
  });

  it.each([
    ['rwxr-xr-x file', 0o755, true],
    ['owner-only x', 0o700, true],
    ['rw-r--r-- file', 0o644, false],
    ['a directory', DIR | 0o755, false],
    ['a symlink itself', SYMLINK | 0o777, false],
    ['a named pipe', 2 ** 25 | 0o777, false],
  ])('%s', (_, mode, expected) => {
    expect(isExecutable({ mode, linkTarget: '' })).toBe(expected);
  });
});

describe('lookUpProgram', () => {
  const fs = (files: Record<string, StatResult>) => async (path: string): Promise<StatResult> => files[path] ?? 'absent';
  const file = (mode = 0o755): StatResult => ({ mode, linkTarget: '' });

  it('finds a program in a later PATH directory', async () => {
    expect(await lookUpProgram('python', '/usr/local/bin:/usr/bin', '/', fs({ '/usr/bin/python': file() }))).toEqual({ found: true });
  });

  it('says the program does not exist, with the PATH searched', async () => {
    expect(await lookUpProgram('pyhton', '/usr/local/bin:/usr/bin', '/', fs({ '/usr/bin/python': file() }))).toEqual({
      found: false,
      reason: 'the command "pyhton" on the image\'s PATH (/usr/local/bin:/usr/bin) does not exist in the image',
    });
    expect(await lookUpProgram('/no/such', '/bin', '/', fs({}))).toEqual({ found: false, reason: 'the command "/no/such" does not exist in the image' });
  });

  it('refuses a file without an x bit and a directory, as execve would (EACCES)', async () => {
    expect(await lookUpProgram('/etc/passwd', '/bin', '/', fs({ '/etc/passwd': file(0o644) }))).toEqual({
      found: false,
      reason: 'the command "/etc/passwd" is not an executable file',
    });
    expect(await lookUpProgram('bin', '/', '/', fs({ '/bin': file(DIR | 0o755) }))).toMatchObject({ found: false, reason: expect.stringMatching(/not an executable file/) });
  });

  it('goes past a non-executable match to a later one, as execvp does', async () => {
    expect(await lookUpProgram('tool', '/a:/b', '/', fs({ '/a/tool': file(0o644), '/b/tool': file() }))).toEqual({ found: true });
  });

  it('judges a symlink by its target; a dangling one is absent', async () => {
    const link = (target: string): StatResult => ({ mode: SYMLINK | 0o777, linkTarget: target });
    expect(await lookUpProgram('sh', '/bin', '/', fs({ '/bin/sh': link('/bin/busybox'), '/bin/busybox': file() }))).toEqual({ found: true });
    expect(await lookUpProgram('sh', '/bin', '/', fs({ '/bin/sh': link('/bin/gone') }))).toMatchObject({ found: false });
    expect(await lookUpProgram('cfg', '/bin', '/', fs({ '/bin/cfg': link('/etc/cfg'), '/etc/cfg': file(0o644) }))).toMatchObject({
      found: false,
      reason: expect.stringMatching(/not an executable file/),
    });
  });

  it('never refuses what the engine could not answer', async () => {
    expect(await lookUpProgram('x', '/a:/b', '/', async () => 'unknown')).toEqual({ found: true });
    expect(await lookUpProgram('x', '/a', '/', fs({ '/a/x': { mode: SYMLINK | 0o777, linkTarget: '' } }))).toEqual({ found: true });
  });

  it('refuses an empty command', async () => {
    expect(await lookUpProgram('', '/bin', '/', fs({}))).toEqual({ found: false, reason: 'the command is an empty string' });
  });
});
