// The GPU SKU catalog: a JSON file in the repo, validated at start-up. A SKU names the
// GPU model as NVML reports it, so the scheduler can match it against node GPUs. A SKU
// also sells CPUs, memory, shared memory, disk and network bandwidth per GPU, as clouds do; the agent runs an
// instance's container under those limits (times its GPUs), so one tenant cannot starve
// the others on its node (docs/security.md).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Type, type Static } from '@sinclair/typebox';
import { parseWithSchema } from '@svc/shared';
import { POOLS, type Pool } from '../models/catalog.js';

export const GPU_COUNTS = [1, 2, 4, 8] as const;

const PoolPrices = Type.Object(
  { na: Type.Optional(Type.Number({ exclusiveMinimum: 0 })), eu: Type.Optional(Type.Number({ exclusiveMinimum: 0 })), apac: Type.Optional(Type.Number({ exclusiveMinimum: 0 })) },
  { additionalProperties: false, minProperties: 1 },
);

export const SkuSchema = Type.Object(
  {
    id: Type.String({ pattern: '^[a-z0-9][a-z0-9-]{0,63}$' }),
    gpu_model: Type.String({ minLength: 1, description: 'As NVML names it, e.g. "NVIDIA H100 80GB HBM3".' }),
    gpu_memory_gb: Type.Integer({ minimum: 1 }),
    gpu_counts: Type.Array(Type.Union(GPU_COUNTS.map((n) => Type.Literal(n))), { minItems: 1, uniqueItems: true }),
    vcpus_per_gpu: Type.Number({ exclusiveMinimum: 0, maximum: 1024, description: 'CPU limit per GPU (vCPUs).' }),
    memory_gib_per_gpu: Type.Number({ exclusiveMinimum: 0, maximum: 65536, description: 'Memory limit per GPU (GiB, no swap).' }),
    shm_gib_per_gpu: Type.Number({ exclusiveMinimum: 0, maximum: 65536, description: 'Size of /dev/shm per GPU (GiB; counts against the memory limit).' }),
    disk_gib_per_gpu: Type.Number({
      exclusiveMinimum: 0,
      maximum: 1_048_576,
      description: "Disk an instance may fill on its node's disk, per GPU (GiB): files written in the container, its volumes, deleted files still open. The node stops an instance over it.",
    }),
    network_gbps_per_gpu: Type.Number({
      exclusiveMinimum: 0,
      maximum: 10_000,
      description: 'Network bandwidth an instance may use, per GPU, each way (Gbit/s): what it sends and what is sent to it. The node shapes its link to it.',
    }),
    /** USD per GPU-hour, on demand, per pool the SKU is sold in. */
    price_per_gpu_hour: PoolPrices,
  },
  { additionalProperties: false },
);

export const SkuCatalogSchema = Type.Object(
  {
    /** Where an instance without `pool` goes: the first pool in this order with capacity. */
    pool_order: Type.Array(Type.Union(POOLS.map((p) => Type.Literal(p))), { minItems: 1, uniqueItems: true }),
    skus: Type.Array(SkuSchema, { minItems: 1 }),
  },
  { additionalProperties: false },
);

export type Sku = Static<typeof SkuSchema>;
export type SkuCatalog = Static<typeof SkuCatalogSchema>;

export const DEFAULT_SKU_CATALOG_PATH = fileURLToPath(new URL('../../catalog/skus.json', import.meta.url));

export function parseSkuCatalog(value: unknown, source: string): SkuCatalog {
  const catalog = parseWithSchema(SkuCatalogSchema, value, `SKU catalog ${source}`);
  const ids = catalog.skus.map((s) => s.id);
  const duplicate = ids.find((id, i) => ids.indexOf(id) !== i);
  if (duplicate) throw new Error(`SKU catalog ${source} lists ${duplicate} twice`);
  return catalog;
}

export function loadSkuCatalog(path: string = DEFAULT_SKU_CATALOG_PATH): SkuCatalog {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Error(`cannot read SKU catalog ${path}: ${(err as Error).message}`);
  }
  return parseSkuCatalog(raw, path);
}

/** Pools a SKU is sold in, in the catalog's pool order. */
export function poolsOf(catalog: SkuCatalog, sku: Sku): Pool[] {
  return catalog.pool_order.filter((p) => sku.price_per_gpu_hour[p] !== undefined);
}

/** The container limits of an instance of `gpus` x `sku`, as the start order carries them to the agent. */
export interface TaskResources {
  nanoCpus: number;
  memoryBytes: number;
  shmBytes: number;
  diskBytes: number;
  /** Each way, Mbit/s. */
  networkMbps: number;
}

const GIB = 1024 ** 3;

export function taskResources(sku: Pick<Sku, 'vcpus_per_gpu' | 'memory_gib_per_gpu' | 'shm_gib_per_gpu' | 'disk_gib_per_gpu' | 'network_gbps_per_gpu'>, gpus: number): TaskResources {
  return {
    nanoCpus: Math.round(sku.vcpus_per_gpu * gpus * 1e9),
    memoryBytes: Math.round(sku.memory_gib_per_gpu * gpus * GIB),
    shmBytes: Math.round(Math.min(sku.shm_gib_per_gpu, sku.memory_gib_per_gpu) * gpus * GIB),
    diskBytes: Math.round(sku.disk_gib_per_gpu * gpus * GIB),
    networkMbps: Math.max(1, Math.round(sku.network_gbps_per_gpu * gpus * 1000)),
  };
}
