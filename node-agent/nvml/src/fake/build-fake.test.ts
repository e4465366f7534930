// buildFakeNvml: compiles once per source version, reuses the build, survives
// concurrent builders, and says what went wrong when the compiler fails.
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openNvml } from '../nvml.js';
import { buildFakeNvml } from './build-fake.js';

const dirs: string[] = [];
const freshDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'fake-nvml-build-'));
  dirs.push(dir);
  return dir;
};

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('buildFakeNvml', () => {
  it('builds libnvidia-ml.so.1 under a directory named by the source hash, once', async () => {
    const outDir = freshDir();
    const [first, second] = await Promise.all([buildFakeNvml(outDir), buildFakeNvml(outDir)]);
    expect(first).toBe(second);
    expect(basename(first)).toBe('libnvidia-ml.so.1');
    expect(dirname(dirname(first))).toBe(outDir);
    expect(basename(dirname(first))).toMatch(/^[0-9a-f]{16}$/);

    const builtAt = statSync(first).mtimeMs;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(await buildFakeNvml(outDir)).toBe(first);
    expect(statSync(first).mtimeMs).toBe(builtAt);

    const nvml = openNvml({ libraryPath: first });
    try {
      expect(nvml.unavailableReason).toBeUndefined();
    } finally {
      await nvml.close();
    }
  });

  it("reports the compiler's failure", async () => {
    const previous = process.env.CC;
    process.env.CC = 'false'; // a "compiler" that always fails; also a different cache key
    try {
      await expect(buildFakeNvml(freshDir())).rejects.toThrow(/building the fake NVML with false failed/);
    } finally {
      if (previous === undefined) delete process.env.CC;
      else process.env.CC = previous;
    }
  });
});
