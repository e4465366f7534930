import { describe, expect, it } from 'vitest';
import { GIB, MIB, containerLimits, type HostCapacity, type TaskResources } from './task-limits.js';

const settings = { reservedCpus: 1, reservedMemoryBytes: 2 * GIB, pidsLimit: 4096, defaultDiskBytes: 50 * GIB, defaultNetworkMbps: 1000, diskMBpsPerGpu: 500, diskIopsPerGpu: 20_000 };
const gpuHost: HostCapacity = { cpus: 224, memoryBytes: 2048 * GIB };
const devHost: HostCapacity = { cpus: 2, memoryBytes: 24 * GIB };
const tiny: HostCapacity = { cpus: 1, memoryBytes: 1 * GIB };
const oneH100: TaskResources = { nanoCpus: 26e9, memoryBytes: 225 * GIB, shmBytes: 32 * GIB };

describe('containerLimits', () => {
  it.each([
    ['catalog numbers on a host big enough: as asked', oneH100, gpuHost, { nanoCpus: 26e9, memoryBytes: 225 * GIB, shmBytes: 32 * GIB }],
    ['catalog numbers on a dev host: clamped to the host less the reserve', oneH100, devHost, { nanoCpus: 1e9, memoryBytes: 22 * GIB, shmBytes: 22 * GIB }],
    ['nothing asked (replica, old control plane): the host less the reserve, shm half of memory', undefined, gpuHost, { nanoCpus: 223e9, memoryBytes: 2046 * GIB, shmBytes: 1023 * GIB }],
    ['zeros count as nothing asked', { nanoCpus: 0, memoryBytes: 0, shmBytes: 0 }, devHost, { nanoCpus: 1e9, memoryBytes: 22 * GIB, shmBytes: 11 * GIB }],
    ['a host smaller than the reserve still gives half a CPU and 256 MiB', oneH100, tiny, { nanoCpus: 0.5e9, memoryBytes: 256 * MIB, shmBytes: 256 * MIB }],
    ['shm never exceeds memory', { memoryBytes: 1 * GIB, shmBytes: 8 * GIB }, gpuHost, { nanoCpus: 223e9, memoryBytes: 1 * GIB, shmBytes: 1 * GIB }],
    ['small asks are kept', { nanoCpus: 0.25e9, memoryBytes: 64 * MIB, shmBytes: 16 * MIB }, devHost, { nanoCpus: 0.25e9, memoryBytes: 64 * MIB, shmBytes: 16 * MIB }],
  ])('%s', (_name, requested, host, expected) => {
    expect(containerLimits(requested, host, settings)).toEqual({ ...expected, pidsLimit: 4096, diskBytes: 50 * GIB, networkMbps: 1000, diskBytesPerSecond: 500e6, diskIops: 20_000 });
  });

  it('keeps the CPU reserve for instances only: replicas may use every CPU, but not the reserved memory', () => {
    expect(containerLimits(undefined, devHost, settings, 'replica')).toEqual({ nanoCpus: 2e9, memoryBytes: 22 * GIB, shmBytes: 11 * GIB, pidsLimit: 4096, diskBytes: 50 * GIB, networkMbps: 0, diskBytesPerSecond: 0, diskIops: 0 });
    expect(containerLimits(undefined, devHost, settings, 'instance').nanoCpus).toBe(1e9);
  });

  it('takes the pids limit from the agent setting', () => {
    expect(containerLimits(oneH100, gpuHost, { ...settings, pidsLimit: 64 }).pidsLimit).toBe(64);
  });

  it.each([
    ['the catalog number, as asked', { diskBytes: 200 * GIB }, 200 * GIB],
    ['larger than the host: as asked (free space changes by the minute; the provider sizes hosts)', { diskBytes: 100_000 * GIB }, 100_000 * GIB],
    ['nothing asked (an older control plane): the agent setting', undefined, 50 * GIB],
    ['zero counts as nothing asked', { diskBytes: 0 }, 50 * GIB],
  ])('disk: %s', (_name, requested, expected) => {
    expect(containerLimits(requested, devHost, settings).diskBytes).toBe(expected);
  });

  it.each([
    ['the catalog number, as asked', { networkMbps: 10_000 }, 'instance', 10_000],
    ['nothing asked (an older control plane): the agent setting', undefined, 'instance', 1000],
    ['zero counts as nothing asked', { networkMbps: 0 }, 'instance', 1000],
    ['a replica is never shaped (the provider\'s model server downloads weights)', { networkMbps: 50 }, 'replica', 0],
  ] as const)('network: %s', (_name, requested, kind, expected) => {
    expect(containerLimits(requested, devHost, settings, kind).networkMbps).toBe(expected);
  });

  it.each([
    ['one GPU: the per-GPU share', 'instance', 1, { diskBytesPerSecond: 500e6, diskIops: 20_000 }],
    ['eight GPUs: eight shares', 'instance', 8, { diskBytesPerSecond: 4000e6, diskIops: 160_000 }],
    ['no GPU (a dev host) counts as one', 'instance', 0, { diskBytesPerSecond: 500e6, diskIops: 20_000 }],
    ['a replica is never throttled (the provider\'s model server loads weights)', 'replica', 2, { diskBytesPerSecond: 0, diskIops: 0 }],
  ] as const)('disk bandwidth: %s', (_name, kind, gpus, expected) => {
    expect(containerLimits(undefined, gpuHost, settings, kind, gpus)).toMatchObject(expected);
  });

  it('disk bandwidth: 0 in the settings is no limit', () => {
    expect(containerLimits(undefined, gpuHost, { ...settings, diskMBpsPerGpu: 0, diskIopsPerGpu: 0 }, 'instance', 4)).toMatchObject({ diskBytesPerSecond: 0, diskIops: 0 });
  });
});
