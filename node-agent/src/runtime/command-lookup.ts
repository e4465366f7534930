// Whether an instance's command exists in its image, asked before the container starts.
//
// Behind the log limiter the command is exec'd by our first process, after Docker has
// started the container, so a command that does not exist no longer makes Docker refuse
// the start: the container would run, exit 127 at once, and be billed as an instance that
// ran. Looking the program up in the created (not yet started) container gives back
// Docker's old answer, a start that fails without a charge, and the tenant cannot fake it:
// none of its code runs before the answer.
//
// The lookup follows execvp(3) so that it never refuses a command that would run: a path
// with a slash is taken as it is (relative to the working directory), a bare name is
// searched along PATH (Docker's default when the container sets none, an empty entry
// meaning the working directory). Whatever the engine cannot answer counts as present, and
// so does a program not found in the first MAX_PATH_ENTRIES entries of a longer PATH.
import { S_IFMT, S_IFREG } from '../access/file-modes.js';

/** A path's POSIX mode, its symlinks followed; absent: nothing there; unknown: the engine could not say (counts as present). */
export type StatResult = { mode: number } | 'absent' | 'unknown';

/** Docker's PATH for a container whose image sets none. */
export const DEFAULT_PATH = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';
/**
 * PATH entries looked at through the engine, each a request to dockerd: the tenant writes
 * the image's PATH, and one of 100,000 entries must not become 100,000 requests.
 */
export const MAX_PATH_ENTRIES = 32;

/** A variable of a container's `KEY=VALUE` environment (the last one wins, as in Docker). */
export function envValue(env: readonly string[] | undefined, name: string): string | undefined {
  const entry = (env ?? []).findLast((e) => e.startsWith(`${name}=`));
  return entry?.slice(name.length + 1);
}

export type ProgramLookup = { found: true } | { found: false; reason: string };

/** The paths execvp would try for `program`, in order. */
export function programCandidates(program: string, path: string | undefined, workdir: string): string[] {
  const base = workdir || '/';
  if (program.includes('/')) return [program.startsWith('/') ? program : joinPath(base, program)];
  if (program === '') return [];
  return (path ?? DEFAULT_PATH)
    .split(':', MAX_PATH_ENTRIES)
    .map((dir) => joinPath(dir === '' ? base : dir.startsWith('/') ? dir : joinPath(base, dir), program));
}

/** The command the limiter will exec: what follows its `--` in the Entrypoint, then the Cmd. */
export function commandBehindLimiter(entrypoint: string[], cmd: string[], limiterPath: string): string[] | null {
  if (entrypoint[0] !== limiterPath) return null;
  const separator = entrypoint.indexOf('--');
  return separator < 0 ? null : [...entrypoint.slice(separator + 1), ...cmd];
}

/** Could execve run this file? Any x bit will do: never refuse what might run. */
export function isExecutable(mode: number): boolean {
  return (mode & S_IFMT) === S_IFREG && (mode & 0o111) !== 0;
}

/**
 * Looks `program` up as execvp would, asking `stat` about each candidate (all at once:
 * each is a round trip to the engine).
 */
export async function lookUpProgram(
  program: string,
  path: string | undefined,
  workdir: string,
  stat: (path: string) => Promise<StatResult>,
): Promise<ProgramLookup> {
  const candidates = programCandidates(program, path, workdir);
  if (candidates.length === 0) return { found: false, reason: 'the command is an empty string' };
  const results = await Promise.all(candidates.map(stat));
  if (results.some((r) => r === 'unknown' || (r !== 'absent' && isExecutable(r.mode)))) return { found: true };
  if (!program.includes('/') && (path ?? DEFAULT_PATH).split(':').length > MAX_PATH_ENTRIES) return { found: true };
  const where = program.includes('/') ? `"${program}"` : `"${program}" on the image's PATH (${path ?? DEFAULT_PATH})`;
  return results.some((r) => r !== 'absent')
    ? { found: false, reason: `the command ${where} is not an executable file` }
    : { found: false, reason: `the command ${where} does not exist in the image` };
}

function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? `${dir}${name}` : `${dir}/${name}`;
}
