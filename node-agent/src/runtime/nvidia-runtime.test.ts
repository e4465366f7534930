import { describe, expect, it } from 'vitest';
import { hasNvidiaRuntime } from './nvidia-runtime.js';

const engine = (Runtimes?: Record<string, unknown>) => ({ info: async () => ({ Runtimes }) });

describe('hasNvidiaRuntime', () => {
  it('is true when docker info lists an nvidia runtime', async () => {
    expect(await hasNvidiaRuntime(engine({ runc: {}, nvidia: { path: 'nvidia-container-runtime' } }))).toBe(true);
    expect(await hasNvidiaRuntime(engine({ runc: {}, 'nvidia-legacy': {} }))).toBe(true);
  });

  it('is false for a dev host with runc only, or no runtime list', async () => {
    expect(await hasNvidiaRuntime(engine({ runc: {}, 'io.containerd.runc.v2': {} }))).toBe(false);
    expect(await hasNvidiaRuntime(engine())).toBe(false);
  });
});
