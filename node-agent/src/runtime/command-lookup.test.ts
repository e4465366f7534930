import { describe, expect, it } from 'vitest';
import { commandBehindLimiter, isExecutable, lookUpProgram, programCandidates, type StatResult } from './command-lookup.js';

const REG = 0o100000;
const DIR = 0o040000;
const FIFO = 0o010000;

describe('programCandidates (execvp order)', () => {
  it.each([
    ['a bare name along PATH', 'python', '/usr/local/bin:/usr/bin', '/app', ['/usr/local/bin/python', '/usr/bin/python']],
    ["no PATH: Docker's default", 'sh', undefined, '/', ['/usr/local/sbin/sh', '/usr/local/bin/sh', '/usr/sbin/sh', '/usr/bin/sh', '/sbin/sh', '/bin/sh']],
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

describe('isExecutable', () => {
  it.each([
    ['rwxr-xr-x file', REG | 0o755, true],
    ['owner-only x', REG | 0o700, true],
    ['rw-r--r-- file', REG | 0o644, false],
    ['a directory', DIR | 0o755, false],
    ['a named pipe', FIFO | 0o777, false],
  ])('%s', (_, mode, expected) => {
    expect(isExecutable(mode)).toBe(expected);
  });
});

describe('lookUpProgram', () => {
  const fs = (files: Record<string, StatResult>) => async (path: string): Promise<StatResult> => files[path] ?? 'absent';
  const file = (mode = 0o755): StatResult => ({ mode: REG | mode });

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
    expect(await lookUpProgram('bin', '/', '/', fs({ '/bin': { mode: DIR | 0o755 } }))).toMatchObject({ found: false, reason: expect.stringMatching(/not an executable file/) });
  });

  it('goes past a non-executable match to a later one, as execvp does', async () => {
    expect(await lookUpProgram('tool', '/a:/b', '/', fs({ '/a/tool': file(0o644), '/b/tool': file() }))).toEqual({ found: true });
  });

  it('never refuses what the engine could not answer', async () => {
    expect(await lookUpProgram('x', '/a:/b', '/', async () => 'unknown')).toEqual({ found: true });
    expect(await lookUpProgram('x', '/a:/b', '/', fs({ '/a/x': 'unknown' }))).toEqual({ found: true });
  });

  it('asks the engine about the first 32 PATH entries only, and refuses nothing past them', async () => {
    const asked: string[] = [];
    const path = Array.from({ length: 100_000 }, (_, i) => `/d${i}`).join(':');
    const lookup = await lookUpProgram('tool', path, '/', async (p) => {
      asked.push(p);
      return 'absent';
    });
    expect(asked).toHaveLength(32);
    expect(lookup).toEqual({ found: true });
    // Within the first 32, a miss is a miss.
    expect(await lookUpProgram('tool', '/a:/b', '/', async () => 'absent')).toMatchObject({ found: false });
  });

  it('refuses an empty command', async () => {
    expect(await lookUpProgram('', '/bin', '/', fs({}))).toEqual({ found: false, reason: 'the command is an empty string' });
  });
});
