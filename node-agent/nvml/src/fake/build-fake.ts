// Compiles fake/fake_nvml.c into a libnvidia-ml.so.1 that tests and the agent's
// dev mode load through the same koffi path as the real library, once per version
// of the source (compile-once.ts).
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileOnce } from '../compile-once.js';

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
export function buildFakeNvml(outDir: string = DEFAULT_CACHE_DIR): Promise<string> {
  return compileOnce({
    source: FAKE_NVML_SOURCE,
    flags: FLAGS,
    libraries: ['-lpthread'],
    output: (hash) => join(outDir, hash, 'libnvidia-ml.so.1'),
    what: 'the fake NVML',
  });
}
