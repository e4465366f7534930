import { describe, expect, it } from 'vitest';
import { loadSkuCatalog, parseSkuCatalog, poolsOf } from './sku-catalog.js';

describe('SKU catalog', () => {
  const catalog = loadSkuCatalog();

  it('ships SKUs named by their NVML GPU model, led by the fake NVML default', () => {
    expect(catalog.skus[0]!.gpu_model).toBe('NVIDIA H100 80GB HBM3');
    for (const sku of catalog.skus) expect(sku.gpu_counts.every((n) => [1, 2, 4, 8].includes(n))).toBe(true);
  });

  it('lists the pools a SKU is sold in, in pool order', () => {
    expect(poolsOf(catalog, catalog.skus.find((s) => s.id === 'l40s-48gb')!)).toEqual(['na', 'eu']);
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
