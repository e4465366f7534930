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
// searched along PATH (glibc's "/bin:/usr/bin" when unset, an empty entry meaning the
// working directory). Whatever the engine cannot answer counts as present.

/** What Docker's `HEAD /containers/{id}/archive` says of a path (X-Docker-Container-Path-Stat). */
export interface PathStat {
  /** Go's os.FileMode: permission bits, and type bits from bit 19 up. */
  mode: number;
  /** A symlink's target, resolved inside the container's root; '' otherwise. */
  linkTarget: string;
}

/** absent: nothing at that path; unknown: the engine could not say (treated as present). */
export type StatResult = PathStat | 'absent' | 'unknown';

export type ProgramLookup = { found: true } | { found: false; reason: string };

const GLIBC_DEFAULT_PATH = '/bin:/usr/bin';
// os.ModeDir | ModeSymlink | ModeNamedPipe | ModeSocket | ModeDevice | ModeCharDevice | ModeIrregular
const GO_MODE_TYPE = (1 << 31) | (1 << 27) | (1 << 25) | (1 << 24) | (1 << 26) | (1 << 21) | (1 << 19);
const GO_MODE_SYMLINK = 1 << 27;

/** The paths execvp would try for `program`, in order. */
export function programCandidates(program: string, path: string | undefined, workdir: string): string[] {
  const base = workdir || '/';
  if (program.includes('/')) return [program.startsWith('/') ? program : joinPath(base, program)];
  if (program === '') return [];
  return (path ?? GLIBC_DEFAULT_PATH).split(':').map((dir) => joinPath(dir === '' ? base : dir.startsWith('/') ? dir : joinPath(base, dir), program));
}

/** The command the limiter will exec: what follows its `--` in the Entrypoint, then the Cmd. */
export function commandBehindLimiter(entrypoint: string[], cmd: string[], limiterPath: string): string[] | null {
  if (entrypoint[0] !== limiterPath) return null;
  const separator = entrypoint.indexOf('--');
  return separator < 0 ? null : [...entrypoint.slice(separator + 1), ...cmd];
}

/** PATH from a container's `KEY=value` environment; undefined when it has none. */
export function pathOf(env: readonly string[]): string | undefined {
  const entry = env.find((e) => e.startsWith('PATH='));
  return entry === undefined ? undefined : entry.slice('PATH='.length);
}

/** Could execve run this file? Any x bit will do: never refuse what might run. */
export function isExecutable(stat: PathStat): boolean {
  return (stat.mode & GO_MODE_TYPE) === 0 && (stat.mode & 0o111) !== 0;
}

/**
 * Looks `program` up as execvp would, asking `stat` about each candidate (all at once:
 * each is a round trip to the engine). A symlink is judged by the file it points to.
 */
export async function lookUpProgram(
  program: string,
  path: string | undefined,
  workdir: string,
  stat: (path: string) => Promise<StatResult>,
): Promise<ProgramLookup> {
  const candidates = programCandidates(program, path, workdir);
  if (candidates.length === 0) return { found: false, reason: 'the command is an empty string' };
  const judged = await Promise.all(candidates.map((candidate) => judge(candidate, stat)));
  if (judged.some((j) => j !== 'absent' && j !== 'not_executable')) return { found: true };
  const where = program.includes('/') ? `"${program}"` : `"${program}" on the image's PATH (${path ?? GLIBC_DEFAULT_PATH})`;
  return judged.includes('not_executable')
    ? { found: false, reason: `the command ${where} is not an executable file` }
    : { found: false, reason: `the command ${where} does not exist in the image` };
}

async function judge(candidate: string, stat: (path: string) => Promise<StatResult>): Promise<'runs' | 'absent' | 'not_executable' | 'unknown'> {
  let result = await stat(candidate);
  if (typeof result === 'object' && (result.mode & GO_MODE_SYMLINK) !== 0 && result.linkTarget) result = await stat(result.linkTarget);
  if (result === 'absent' || result === 'unknown') return result;
  // A symlink Docker could not resolve further: let execve decide.
  if ((result.mode & GO_MODE_SYMLINK) !== 0) return 'unknown';
  return isExecutable(result) ? 'runs' : 'not_executable';
}

function joinPath(dir: string, name: string): string {
  return dir.endsWith('/') ? `${dir}${name}` : `${dir}/${name}`;
}
