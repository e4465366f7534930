import { describe, expect, it } from 'vitest';
import { createLogger } from '@svc/shared';
import { openNvml } from 'node-nvml-bindings';
import { collectHostFacts } from './host-facts.js';

const log = createLogger('silent', 'test');

describe('collectHostFacts', () => {
  it('reports this host, no Docker engine and no NVML with the reason', async () => {
    const nvml = openNvml({ libraryPath: '/nonexistent/libnvidia-ml.so.1' });
    const facts = await collectHostFacts({
      nvml,
      hostname: 'gpu-host-1',
      agentVersion: '0.1.0',
      log,
      docker: () => Promise.reject(new Error('connect ENOENT /var/run/docker.sock')),
    });
    expect(facts).toMatchObject({
      hostname: 'gpu-host-1',
      docker_version: '',
      nvidia_runtime: false,
      nvml_available: false,
      nvidia_driver_version: '',
      cuda_version: '',
      agent_version: '0.1.0',
    });
    expect(facts.nvml_unavailable_reason).toMatch(/nonexistent/);
    expect(facts.cpu_cores).toBeGreaterThan(0);
    expect(facts.memory_total_bytes).toBeGreaterThan(0);
    expect(facts.kernel).not.toBe('');
    expect(facts.cpu_model).not.toBe('');
  });

  it('reports the Docker engine it is given', async () => {
    const nvml = openNvml({ libraryPath: '/nonexistent/libnvidia-ml.so.1' });
    const facts = await collectHostFacts({
      nvml,
      hostname: 'h',
      agentVersion: '0.1.0',
      log,
      docker: async () => ({ version: '26.1.5', nvidiaRuntime: true }),
    });
    expect(facts).toMatchObject({ docker_version: '26.1.5', nvidia_runtime: true });
  });
});
