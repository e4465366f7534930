// node-nvml-bindings: NVML (libnvidia-ml.so.1) through koffi, opened at run time so
// the package installs and builds on hosts without a GPU. openNvml() is the entry
// point; the fake library helpers live under ./fake/ and are exported for tests
// and the agent's simulation mode.
export { openNvml, DEFAULT_NVML_LIBRARY } from './nvml.js';
export { NvmlError, NvmlReturn, nvmlReturnName } from './nvml-error.js';
export { decodeThrottleReasons, throttleReasonBits, type ThrottleReason } from './throttle-reasons.js';
export { nvmlEventTypeBits } from './event-watch.js';
export { buildFakeNvml, FAKE_NVIDIA_SMI, FAKE_NVML_SOURCE } from './fake/build-fake.js';
export { compileOnce, type CompileOnce } from './compile-once.js';
export { createFakeNvmlFixture, type FakeNvmlFixture } from './fake/fake-nvml-fixture.js';
export {
  FakeNvmlStateFile,
  formatFakeNvmlState,
  type FakeGpu,
  type FakeNvmlEvent,
  type FakeNvmlField,
  type FakeNvmlState,
} from './fake/fake-state.js';
export type {
  DeviceReadings,
  GpuField,
  GpuFieldError,
  GpuReadFailure,
  GpuReading,
  Nvml,
  NvmlEvent,
  NvmlEventType,
  OpenNvmlOptions,
  WatchEventsOptions,
} from './types.js';
