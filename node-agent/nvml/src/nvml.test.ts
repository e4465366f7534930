// openNvml() against the fake libnvidia-ml.so.1, loaded through koffi exactly as
// the real library is: readings, absent (unsupported) fields, NVML errors, and
// what happens without a usable library.
import { afterEach, describe, expect, it } from 'vitest';
import { createFakeNvmlFixture, type FakeNvmlFixture } from './fake/fake-nvml-fixture.js';
import type { FakeNvmlState } from './fake/fake-state.js';
import { NvmlError } from './nvml-error.js';
import { openNvml } from './nvml.js';
import type { Nvml } from './types.js';

let fixture: FakeNvmlFixture | undefined;
let nvml: Nvml | undefined;

async function open(state: FakeNvmlState): Promise<{ nvml: Nvml; fixture: FakeNvmlFixture }> {
  fixture = await createFakeNvmlFixture(state);
  nvml = openNvml({ libraryPath: fixture.libraryPath });
  expect(nvml.unavailableReason).toBeUndefined();
  return { nvml, fixture };
}

afterEach(async () => {
  await nvml?.close();
  fixture?.dispose();
  nvml = undefined;
  fixture = undefined;
});

describe('openNvml with the fake library', () => {
  it('reads two GPUs with every scripted value', async () => {
    const { nvml } = await open({
      driverVersion: '535.161.08',
      cudaVersion: 12020,
      gpus: [
        {
          uuid: 'GPU-aaaaaaaa-1111-2222-3333-444444444444',
          pciBusId: '00000000:3B:00.0',
          memoryTotalBytes: 85_520_809_984,
          memoryUsedBytes: 42_000_000_000,
          utilizationGpuPercent: 97,
          utilizationMemoryPercent: 61,
          temperatureC: 71,
          powerUsageWatts: 612.5,
          powerLimitWatts: 700,
          smClockMhz: 1755,
          memoryClockMhz: 2619,
          eccCorrectedVolatile: 3,
          eccUncorrectedVolatile: 1,
          eccCorrectedAggregate: 40,
          eccUncorrectedAggregate: 2,
          retiredPagesMultipleSingleBitEcc: 4,
          retiredPagesDoubleBitEcc: 1,
          remappedRowsCorrected: 5,
          remappedRowsUncorrected: 1,
          remappedRowsPending: true,
          remappedRowsFailed: false,
          throttleReasons: 0x44,
        },
        { name: 'NVIDIA A100-SXM4-80GB', temperatureC: 30 },
      ],
    });

    expect(nvml.available).toBe(true);
    expect(nvml.driverVersion()).toBe('535.161.08');
    expect(nvml.cudaVersion()).toBe('12.2');
    expect(nvml.deviceCount()).toBe(2);

    const { gpus, failed } = nvml.readDevices();
    expect(failed).toEqual([]);
    expect(gpus).toHaveLength(2);
    expect(gpus[0]).toEqual({
      index: 0,
      uuid: 'GPU-aaaaaaaa-1111-2222-3333-444444444444',
      name: 'NVIDIA H100 80GB HBM3',
      pciBusId: '00000000:3B:00.0',
      memoryTotalBytes: 85_520_809_984,
      memoryUsedBytes: 42_000_000_000,
      utilizationGpuPercent: 97,
      utilizationMemoryPercent: 61,
      temperatureC: 71,
      powerUsageWatts: 612.5,
      powerLimitWatts: 700,
      smClockMhz: 1755,
      memoryClockMhz: 2619,
      eccCorrectedVolatile: 3,
      eccUncorrectedVolatile: 1,
      eccCorrectedAggregate: 40,
      eccUncorrectedAggregate: 2,
      retiredPages: { multipleSingleBitEcc: 4, doubleBitEcc: 1 },
      remappedRows: { corrected: 5, uncorrected: 1, pending: true, failed: false },
      throttleReasons: { mask: 0x44, reasons: ['sw_power_cap', 'hw_thermal_slowdown'] },
      errors: [],
    });
    expect(gpus[1]).toMatchObject({ index: 1, name: 'NVIDIA A100-SXM4-80GB', temperatureC: 30 });
    expect(gpus[1]?.uuid).not.toBe(gpus[0]?.uuid);
  });

  it('reads eight GPUs, each with its own values', async () => {
    const { nvml } = await open({
      gpus: Array.from({ length: 8 }, (_, i) => ({ temperatureC: 40 + i, memoryUsedBytes: i * 1024 })),
    });

    const { gpus, failed } = nvml.readDevices();
    expect(failed).toEqual([]);
    expect(gpus.map((g) => g.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(gpus.map((g) => g.temperatureC)).toEqual([40, 41, 42, 43, 44, 45, 46, 47]);
    expect(gpus.map((g) => g.memoryUsedBytes)).toEqual([0, 1024, 2048, 3072, 4096, 5120, 6144, 7168]);
    expect(new Set(gpus.map((g) => g.uuid)).size).toBe(8);
    expect(new Set(gpus.map((g) => g.pciBusId)).size).toBe(8);
  });

  it('simulates GPUs from FAKE_NVML_GPUS when there is no state file', async () => {
    const { nvml: first } = await open({ gpus: [] });
    await first.close();
    delete process.env.FAKE_NVML_STATE;
    process.env.FAKE_NVML_GPUS = '3xNVIDIA A100-SXM4-80GB';
    try {
      nvml = openNvml({ libraryPath: fixture!.libraryPath });
      expect(nvml.deviceCount()).toBe(3);
      expect(nvml.readDevices().gpus.map((g) => g.name)).toEqual(Array(3).fill('NVIDIA A100-SXM4-80GB'));
    } finally {
      delete process.env.FAKE_NVML_GPUS;
    }
  });

  it('leaves values NVML does not support absent, not zero, and not as errors', async () => {
    const { nvml } = await open({
      gpus: [{ unsupported: ['power_limit', 'ecc', 'retired_pages', 'clock_mem'] }],
    });

    const gpu = nvml.readDevice(0);
    for (const field of [
      'powerLimitWatts',
      'eccCorrectedVolatile',
      'eccUncorrectedVolatile',
      'eccCorrectedAggregate',
      'eccUncorrectedAggregate',
      'retiredPages',
      'memoryClockMhz',
    ]) {
      expect(gpu, field).not.toHaveProperty(field);
    }
    expect(gpu.errors).toEqual([]);
    // The neighbours of the unsupported calls are still read.
    expect(gpu.powerUsageWatts).toBe(70);
    expect(gpu.smClockMhz).toBe(1980);
    expect(gpu.remappedRows).toEqual({ corrected: 0, uncorrected: 0, pending: false, failed: false });
  });

  it("reports an NVML error with NVML's own error string and keeps reading the other fields", async () => {
    const { nvml } = await open({ gpus: [{ temperatureC: 50, errors: { temperature: 15, utilization: 999 } }] });

    const gpu = nvml.readDevice(0);
    expect(gpu).not.toHaveProperty('temperatureC');
    expect(gpu).not.toHaveProperty('utilizationGpuPercent');
    expect(gpu.errors.map((e) => e.field)).toEqual(['utilization', 'temperatureC']);

    const [utilization, temperature] = gpu.errors.map((e) => e.error);
    expect(temperature).toBeInstanceOf(NvmlError);
    expect(temperature).toMatchObject({
      code: 15,
      codeName: 'NVML_ERROR_GPU_IS_LOST',
      nvmlFunction: 'nvmlDeviceGetTemperature',
      nvmlMessage: 'GPU is lost', // nvmlErrorString(15), from the library
      gpuIndex: 0,
      recoverable: false,
    });
    expect(temperature?.message).toBe('nvmlDeviceGetTemperature (GPU 0): GPU is lost [NVML_ERROR_GPU_IS_LOST]');
    expect(utilization).toMatchObject({ code: 999, nvmlMessage: 'Unknown Error', recoverable: true });
    expect(gpu.memoryTotalBytes).toBe(85_520_809_984);
  });

  it('lists a GPU that cannot be identified as failed and reads the others', async () => {
    const { nvml } = await open({ gpus: [{}, { errors: { uuid: 15 } }, {}] });

    const { gpus, failed } = nvml.readDevices();
    expect(gpus.map((g) => g.index)).toEqual([0, 2]);
    expect(failed).toHaveLength(1);
    expect(failed[0]?.index).toBe(1);
    expect(failed[0]?.error).toMatchObject({ code: 15, nvmlFunction: 'nvmlDeviceGetUUID' });
    expect(() => nvml.readDevice(1)).toThrow(NvmlError);
    expect(() => nvml.readDevice(7)).toThrow(/nvmlDeviceGetHandleByIndex_v2 \(GPU 7\): Invalid Argument/);
  });

  it('sees changes to the state file between reads', async () => {
    const { nvml, fixture } = await open({ gpus: [{ temperatureC: 40 }, {}] });
    expect(nvml.readDevice(0).temperatureC).toBe(40);

    fixture.state.updateGpu(0, { temperatureC: 88, eccUncorrectedVolatile: 2 });
    const gpu = nvml.readDevice(0);
    expect(gpu.temperatureC).toBe(88);
    expect(gpu.eccUncorrectedVolatile).toBe(2);

    fixture.state.set({ gpus: [{}] });
    expect(nvml.deviceCount()).toBe(1);
  });

  it("reads the driver's GPU recovery action (nvmlDeviceGetFieldValues), absent when not supported", async () => {
    const { nvml, fixture } = await open({ gpus: [{ recoveryAction: 1 }, {}, { unsupported: ['recovery_action'] }] });
    expect(nvml.gpuRecoveryAction(0)).toBe(1);
    expect(nvml.gpuRecoveryAction(1)).toBe(0);
    expect(nvml.gpuRecoveryAction(2)).toBeUndefined();
    fixture.state.updateGpu(0, { recoveryAction: 2 });
    expect(nvml.gpuRecoveryAction(0)).toBe(2);
    fixture.state.updateGpu(1, { errors: { recovery_action: 15 } });
    expect(() => nvml.gpuRecoveryAction(1)).toThrow(NvmlError);
    expect(() => nvml.gpuRecoveryAction(7)).toThrow(NvmlError);
  });

  it("is unavailable, with NVML's reason, when nvmlInit_v2 fails", async () => {
    fixture = await createFakeNvmlFixture({ gpus: [{}], initError: 9 });
    nvml = openNvml({ libraryPath: fixture.libraryPath });

    expect(nvml.available).toBe(false);
    expect(nvml.unavailableReason).toContain('nvmlInit_v2: Driver Not Loaded');
    expect(nvml.deviceCount()).toBe(0);
    expect(nvml.readDevices()).toEqual({ gpus: [], failed: [] });
  });

  it('refuses calls after close, and close can be repeated', async () => {
    const { nvml } = await open({ gpus: [{}] });
    await nvml.close();
    await nvml.close();
    expect(() => nvml.deviceCount()).toThrow(/closed/);
    expect(() => nvml.readDevices()).toThrow(NvmlError);
  });
});

describe('openNvml without a library', () => {
  it('reports zero GPUs and the reason instead of throwing', async () => {
    const missing = '/nonexistent/nvidia/libnvidia-ml.so.1';
    const nvml = openNvml({ libraryPath: missing });

    expect(nvml.available).toBe(false);
    expect(nvml.libraryPath).toBe(missing);
    expect(nvml.unavailableReason).toContain(missing);
    expect(nvml.unavailableReason).toMatch(/No such file/);
    expect(nvml.deviceCount()).toBe(0);
    expect(nvml.readDevices()).toEqual({ gpus: [], failed: [] });
    expect(nvml.driverVersion()).toBeUndefined();
    expect(nvml.cudaVersion()).toBeUndefined();
    const events = [];
    for await (const event of nvml.watchEvents({ timeoutMs: 10 })) events.push(event);
    expect(events).toEqual([]);
    await expect(nvml.close()).resolves.toBeUndefined();
  });

  it('reports a library that lacks NVML symbols as unavailable', () => {
    const nvml = openNvml({ libraryPath: 'libc.so.6' });
    expect(nvml.available).toBe(false);
    expect(nvml.unavailableReason).toMatch(/nvmlInit_v2/);
  });
});
