// A node whose disk holding Docker's data is nearly full takes no new instance, end to end:
// a real agent process measures its real Docker data root against a threshold of 1% (so
// this host's disk is "nearly full"), says so in its host facts, and the control plane
// places nothing there and shows no free GPUs, with the reason visible to on-call.
import Docker from 'dockerode';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dockerRootDir } from '../node-agent/src/runtime/disk-usage.js';
import { statusLabel } from '../control-plane/src/nodes/node-status.js';
import { SLEEPER_IMAGE } from './support/images.js';
import { startInstanceStack, type InstanceStack } from './support/instance-stack.js';
import { eventually } from './support/node-agent-process.js';

let stack: InstanceStack;

beforeAll(async () => {
  stack = await startInstanceStack({ name: 'disk-pressure', gpus: 2, agentEnv: { SVC_DISK_PRESSURE_PERCENT: '1' }, gpusListedOnly: true });
}, 120_000);

afterAll(async () => {
  await stack?.close();
});

describe('a node under disk pressure', () => {
  it('reports the disk holding Docker data and the pressure in its host facts', async () => {
    const node = await eventually(async () => {
      const [entry] = await stack.cp.app.services.nodes.list();
      return entry?.node.hostFacts?.['disk_pressure'] === true ? entry.node : undefined;
    }, 20_000, 'the node to report disk pressure');
    const disk = node.hostFacts!['docker_disk'] as { mount: string; size_bytes: number; used_bytes: number };
    expect(disk.mount).toBe(await dockerRootDir(new Docker()));
    expect(disk.used_bytes).toBeGreaterThan(disk.size_bytes / 100);
    expect(node.status).toBe('ready');
    expect(statusLabel(node)).toBe('ready,disk-pressure');
  });

  it('gets no new instance, and the SKU list shows none of its GPUs as free', async () => {
    const created = await stack.create({ image: SLEEPER_IMAGE });
    expect(created.status).toBe(409);
    expect(created.body.error).toMatchObject({ type: 'no_capacity' });
    const skus = await stack.api('GET', '/v1/skus');
    expect(skus.status).toBe(200);
    for (const sku of skus.body.data as Array<{ pools: Array<{ free_gpus: number }> }>) {
      for (const pool of sku.pools) expect(pool.free_gpus).toBe(0);
    }
  });
});
