// GET /v1/skus (compute:read): the GPU catalog with free capacity per pool, so a user can
// choose before creating an instance.
import { Type } from '@sinclair/typebox';
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import { freeCapacity } from '../instances/placement.js';
import { poolsOf, type SkuCatalog } from '../instances/sku-catalog.js';
import type { GpuInventory } from '../instances/task-dispatch.js';
import type { InstanceStore } from '../store/instance-store.js';
import { ListOf, responses } from '../http/schemas.js';

const Sku = Type.Object(
  {
    id: Type.String(),
    object: Type.Literal('sku'),
    gpu_model: Type.String(),
    gpu_memory_gb: Type.Integer(),
    gpu_counts: Type.Array(Type.Integer()),
    vcpus_per_gpu: Type.Number({ description: 'CPU limit of an instance, per GPU.' }),
    memory_gib_per_gpu: Type.Number({ description: 'Memory limit of an instance (no swap), per GPU, in GiB.' }),
    shm_gib_per_gpu: Type.Number({ description: 'Size of /dev/shm, per GPU, in GiB (counts against the memory limit).' }),
    disk_gib_per_gpu: Type.Number({
      description: 'Disk an instance may fill, per GPU, in GiB: files written in the container, its volumes, deleted files still open. An instance over it is stopped by its node.',
    }),
    network_gbps_per_gpu: Type.Number({
      description: 'Network bandwidth of an instance, per GPU, each way, in Gbit/s: what it sends and what is sent to it (its node shapes its link).',
    }),
    pools: Type.Array(
      Type.Object({
        pool: Type.String(),
        price_per_gpu_hour: Type.Number(),
        free_gpus: Type.Integer(),
        largest_free_block: Type.Integer({ description: 'Most free GPUs on one node: the largest instance that fits now.' }),
      }),
    ),
  },
  { $id: 'Sku' },
);

export function skuRoutes(catalog: SkuCatalog, inventory: GpuInventory, store: InstanceStore): FastifyPluginAsyncTypebox {
  return async (app) => {
    app.addSchema(Sku);
    app.get(
      '/skus',
      { config: { scope: 'compute:read' }, schema: { tags: ['instances'], operationId: 'listSkus', summary: 'GPU SKUs with prices and free capacity per pool', response: responses({ 200: ListOf(Type.Ref(Sku)) }) } },
      async () => {
        const claimed = await store.claimedGpuUuids();
        const nodes = (await inventory.nodes()).map((n) => ({ ...n, gpus: n.gpus.map((g) => ({ ...g, claimed: g.claimed || claimed.has(g.uuid) })) }));
        return {
          object: 'list' as const,
          data: catalog.skus.map((sku) => {
            const free = freeCapacity(nodes, sku.gpu_model);
            return {
              id: sku.id,
              object: 'sku' as const,
              gpu_model: sku.gpu_model,
              gpu_memory_gb: sku.gpu_memory_gb,
              gpu_counts: [...sku.gpu_counts],
              vcpus_per_gpu: sku.vcpus_per_gpu,
              memory_gib_per_gpu: sku.memory_gib_per_gpu,
              shm_gib_per_gpu: sku.shm_gib_per_gpu,
              disk_gib_per_gpu: sku.disk_gib_per_gpu,
              network_gbps_per_gpu: sku.network_gbps_per_gpu,
              pools: poolsOf(catalog, sku).map((pool) => ({
                pool,
                price_per_gpu_hour: sku.price_per_gpu_hour[pool]!,
                free_gpus: free[pool]?.free_gpus ?? 0,
                largest_free_block: free[pool]?.largest_block ?? 0,
              })),
            };
          }),
        };
      },
    );
  };
}
