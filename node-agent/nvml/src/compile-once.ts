// Compiles one C file with `gcc` (or `$CC`) unless a build of the same source, compiler and
// flags is already there: the output is named by a hash of the three, so a build is reused
// until the C changes, and a new one never replaces a file something may still be using
// (a mounted binary, a loaded library). Concurrent builders (parallel test files) each
// write a temporary file and rename it into place.
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { access, chmod, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { dirname } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface CompileOnce {
  source: string;
  /** Compiler flags; libraries (`-l…`) go in `libraries`, after the source. */
  flags: string[];
  libraries?: string[];
  /** Where the build of this hash goes. */
  output: (hash: string) => string;
  /** Names what failed to build, for the error: "the fake NVML". */
  what: string;
  /** What to install when it fails, added to the error. */
  hint?: string;
  /** File mode of the result (e.g. 0o755 for a program others run). */
  mode?: number;
}

export async function compileOnce(options: CompileOnce): Promise<string> {
  const compiler = process.env.CC || 'gcc';
  const source = await readFile(options.source);
  const hash = createHash('sha256').update(`${compiler} ${options.flags.join(' ')}\0`).update(source).digest('hex').slice(0, 16);
  const output = options.output(hash);
  try {
    await access(output);
    return output;
  } catch {
    // not built yet
  }
  await mkdir(dirname(output), { recursive: true });
  const temporary = `${output}.${randomUUID()}.tmp`;
  try {
    await run(compiler, [...options.flags, '-o', temporary, options.source, ...(options.libraries ?? [])]);
    if (options.mode !== undefined) await chmod(temporary, options.mode);
    await rename(temporary, output);
  } catch (err) {
    await rm(temporary, { force: true });
    const stderr = (err as { stderr?: string }).stderr?.trim();
    const hint = options.hint ? ` (${options.hint})` : '';
    throw new Error(`building ${options.what} with ${compiler} failed${hint}: ${stderr || (err as Error).message}`, { cause: err });
  }
  return output;
}
