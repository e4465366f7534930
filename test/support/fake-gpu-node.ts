// A node with GPUs from the fake NVML: the GPUs' state file, and a way to start (and
// restart) the real agent process on it, enrolled with a token or, once enrolled, as the
// same node from its data dir.
import { join } from 'node:path';
import { buildFakeNvml, FAKE_NVIDIA_SMI, FakeNvmlStateFile } from 'node-nvml-bindings';
import { spawnAgent, type AgentProcess } from './node-agent-process.js';

export interface FakeGpuNode {
  gpuState: FakeNvmlStateFile;
  /** Starts the agent against the control plane's gRPC port; `token` '' once enrolled. */
  spawn(grpcPort: number, token: string, env?: Record<string, string>): AgentProcess;
}

export async function fakeGpuNode(dir: string, name: string, gpus: number): Promise<FakeGpuNode> {
  const libraryPath = await buildFakeNvml();
  const gpuState = new FakeNvmlStateFile(join(dir, 'gpus.state'), { gpus: Array.from({ length: gpus }, () => ({})) });
  return {
    gpuState,
    spawn: (grpcPort, token, env = {}) =>
      spawnAgent({
        SVC_CONTROL_PLANE: `127.0.0.1:${grpcPort}`,
        SVC_AGENT_DATA_DIR: join(dir, 'agent'),
        SVC_AGENT_HOSTNAME: `${name}-host`,
        SVC_NVML_LIBRARY: libraryPath,
        // GPU resets go through the fake nvidia-smi, over the same state file.
        SVC_NVIDIA_SMI: FAKE_NVIDIA_SMI,
        SVC_NODE_TOKEN: token,
        SVC_PUBLIC_HOST: '127.0.0.1',
        ...gpuState.env(),
        ...env,
      }),
  };
}
