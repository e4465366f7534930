// A ready fake NVML for tests: builds the library, writes a state file in a fresh
// temporary directory and points FAKE_NVML_STATE at it. The fake reads the
// variable from the process environment (getenv), so tests that use this must
// run in a process of their own (vitest's default "forks" pool), not a worker thread.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildFakeNvml } from './build-fake.js';
import { FakeNvmlStateFile, type FakeNvmlState } from './fake-state.js';

export interface FakeNvmlFixture {
  /** Pass as openNvml({ libraryPath }). */
  libraryPath: string;
  /** Change GPUs or inject events while NVML is open. */
  state: FakeNvmlStateFile;
  /** Restores FAKE_NVML_STATE and removes the temporary directory. */
  dispose(): void;
}

export async function createFakeNvmlFixture(state: FakeNvmlState): Promise<FakeNvmlFixture> {
  const libraryPath = await buildFakeNvml();
  const dir = mkdtempSync(join(tmpdir(), 'fake-nvml-'));
  const stateFile = new FakeNvmlStateFile(join(dir, 'state'), state);
  const previous = process.env.FAKE_NVML_STATE;
  process.env.FAKE_NVML_STATE = stateFile.path;
  return {
    libraryPath,
    state: stateFile,
    dispose() {
      if (previous === undefined) delete process.env.FAKE_NVML_STATE;
      else process.env.FAKE_NVML_STATE = previous;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
