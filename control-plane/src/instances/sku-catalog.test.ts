import { describe, expect, it } from 'vitest';
import { loadSkuCatalog, parseSkuCatalog, poolsOf, taskResources } from './sku-catalog.js';

describe('SKU catalog', () => {
  const catalog = loadSkuCatalog();

  it('ships SKUs named by their NVML GPU model, led by the fake NVML default', () => {
    expect(catalog.skus[0]!.gpu_model).toBe('NVIDIA H100 80GB HBM3');
    for (const sku of catalog.skus) expect(sku.gpu_counts.every((n) => [1, 2, 4, 8].includes(n))).toBe(true);
  });

  it('lists the pools a SKU is sold in, in pool order', () => {
    expect(poolsOf(catalog, catalog.skus.find((s) => s.id === 'l40s-48gb')!)).toEqual(['na', 'eu']);
  });

  it('sells CPUs, memory, shared memory, disk and network bandwidth per GPU, as clouds do, and multiplies them by the GPUs', () => {
    const h100 = catalog.skus.find((s) => s.id === 'h100-80gb')!;
    expect(h100).toMatchObject({ vcpus_per_gpu: 26, memory_gib_per_gpu: 225, shm_gib_per_gpu: 32, disk_gib_per_gpu: 500, network_gbps_per_gpu: 10 });
    expect(taskResources(h100, 8)).toEqual({ nanoCpus: 208e9, memoryBytes: 1800 * 1024 ** 3, shmBytes: 256 * 1024 ** 3, diskBytes: 4000 * 1024 ** 3, networkMbps: 80_000 });
    for (const sku of catalog.skus) expect(sku.shm_gib_per_gpu).toBeLessThan(sku.memory_gib_per_gpu);
    // Shared memory is charged to the memory limit: never more than it.
    expect(taskResources({ vcpus_per_gpu: 0.5, memory_gib_per_gpu: 0.25, shm_gib_per_gpu: 1, disk_gib_per_gpu: 0.5, network_gbps_per_gpu: 0.04 }, 2)).toMatchObject({ nanoCpus: 1e9, memoryBytes: 512 * 1024 ** 2, shmBytes: 512 * 1024 ** 2, networkMbps: 80 });
  });

  it('refuses a SKU without its CPU, memory, shared-memory, disk or network numbers', () => {
    for (const field of ['vcpus_per_gpu', 'memory_gib_per_gpu', 'shm_gib_per_gpu', 'disk_gib_per_gpu', 'network_gbps_per_gpu']) {
      const bad = structuredClone(catalog) as unknown as { skus: Array<Record<string, unknown>> };
      delete bad.skus[0]![field];
      expect(() => parseSkuCatalog(bad, 'x')).toThrow(new RegExp(field));
    }
  });

  it('refuses unknown GPU counts and duplicate ids', () => {
    const bad = structuredClone(catalog) as unknown as { skus: Array<{ gpu_counts: number[] }> };
    bad.skus[0]!.gpu_counts = [3];
    expect(() => parseSkuCatalog(bad, 'x')).toThrow(/gpu_counts/);
    const dup = structuredClone(catalog);
    dup.skus.push(dup.skus[0]!);
    expect(() => parseSkuCatalog(dup, 'x')).toThrow(/twice/);
  });
});
