// Simulated GPUs go through the real koffi path: the fake library, opened by openNvml.
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openNvml } from 'node-nvml-bindings';
import { parseSimulatedGpus, prepareSimulatedNvml } from './simulated-gpus.js';

const savedState = process.env.FAKE_NVML_STATE;
afterEach(() => {
  if (savedState === undefined) delete process.env.FAKE_NVML_STATE;
  else process.env.FAKE_NVML_STATE = savedState;
});

describe('simulated GPUs', () => {
  it.each([
    ['', undefined],
    ['0', { count: 0, name: undefined }],
    ['2', { count: 2, name: undefined }],
    ['8xNVIDIA A100-SXM4-80GB', { count: 8, name: 'NVIDIA A100-SXM4-80GB' }],
  ])('parses %j', (value, expected) => {
    expect(parseSimulatedGpus(value)).toEqual(expected);
  });

  it.each(['9', 'x2', 'two', '-1'])('refuses %j', (value) => {
    expect(() => parseSimulatedGpus(value)).toThrow(RangeError);
  });

  it('loads the fake library with that many GPUs of that name, scriptable through a state file', async () => {
    delete process.env.FAKE_NVML_STATE;
    const dataDir = mkdtempSync(join(tmpdir(), 'agent-sim-'));
    const { libraryPath, stateFile } = await prepareSimulatedNvml({ count: 3, name: 'NVIDIA A100-SXM4-80GB' }, dataDir);
    expect(stateFile).toBe(join(dataDir, 'simulated-gpus.state'));
    expect(process.env.FAKE_NVML_STATE).toBe(stateFile);
    const nvml = openNvml({ libraryPath });
    try {
      expect(nvml.available).toBe(true);
      const { gpus } = nvml.readDevices();
      expect(gpus.map((g) => g.name)).toEqual(Array(3).fill('NVIDIA A100-SXM4-80GB'));
      expect(new Set(gpus.map((g) => g.uuid)).size).toBe(3);
    } finally {
      await nvml.close();
    }
  });

  it("leaves a test's own state file in charge when one is set", async () => {
    process.env.FAKE_NVML_STATE = '/tmp/some-state-file';
    const dataDir = mkdtempSync(join(tmpdir(), 'agent-sim-'));
    expect((await prepareSimulatedNvml({ count: 2, name: undefined }, dataDir)).stateFile).toBe('/tmp/some-state-file');
    expect(existsSync(join(dataDir, 'simulated-gpus.state'))).toBe(false);
  });
});
