// Compiles fake/fake_nvml.c into a libnvidia-ml.so.1 that tests and the agent's
// dev mode load through the same koffi path as the real library. The output
// directory is named by a hash of the source and flags, so a build is reused
// until the C changes, and concurrent builders (parallel test files) each write
// a temporary file and rename it into place.
import { execFile } from 'node:child_process';
import { createHash, randomUUID } from 'node:crypto';
import { access, mkdir, readFile, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

const run = promisify(execFile);

const packageDir = fileURLToPath(new URL('../../', import.meta.url));
/** The C source of the fake library. */
export const FAKE_NVML_SOURCE = join(packageDir, 'fake', 'fake_nvml.c');
/** `nvidia-smi --gpu-reset -i <uuid>` over the fake's state file (see the script's header). */
export const FAKE_NVIDIA_SMI = join(packageDir, 'fake', 'nvidia-smi');
const DEFAULT_CACHE_DIR = join(packageDir, 'node_modules', '.cache', 'fake-nvml');
const FLAGS = ['-shared', '-fPIC', '-O2', '-Wall'];

/**
 * Builds the fake NVML (with `gcc`, or `$CC`) unless a build of the same source
 * exists, and returns the path of `<outDir>/<hash>/libnvidia-ml.so.1`.
 * `outDir` defaults to this package's node_modules/.cache/fake-nvml.
 */
export async function buildFakeNvml(outDir: string = DEFAULT_CACHE_DIR): Promise<string> {
  const compiler = process.env.CC || 'gcc';
  const source = await readFile(FAKE_NVML_SOURCE);
  const hash = createHash('sha256').update(`${compiler} ${FLAGS.join(' ')}\0`).update(source).digest('hex').slice(0, 16);
  const dir = join(outDir, hash);
  const library = join(dir, 'libnvidia-ml.so.1');
  if (await exists(library)) return library;

  await mkdir(dir, { recursive: true });
  const temporary = `${library}.${randomUUID()}.tmp`;
  try {
    await run(compiler, [...FLAGS, '-o', temporary, FAKE_NVML_SOURCE, '-lpthread']);
    await rename(temporary, library);
  } catch (err) {
    await rm(temporary, { force: true });
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new Error(`building the fake NVML with ${compiler} failed: ${stderr || (err as Error).message}`, { cause: err });
  }
  return library;
}

async function exists(path: string): Promise<boolean> {
  try {
    await access(path);
    return true;
  } catch {
    return false;
  }
}
