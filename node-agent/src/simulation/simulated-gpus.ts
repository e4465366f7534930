// Development without GPUs: SVC_SIMULATE_GPUS=<count>[x<NVML name>] makes the agent build
// the project's fake libnvidia-ml.so.1 (node-nvml-bindings) and load it through the same
// koffi path as the real driver. The fake reads FAKE_NVML_STATE (a scriptable state file)
// from the process environment via getenv, so it is set here, in the agent process,
// before NVML is opened.
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { buildFakeNvml, FakeNvmlStateFile } from 'node-nvml-bindings';

export interface SimulatedGpus {
  count: number;
  /** NVML name, e.g. "NVIDIA A100-SXM4-80GB"; undefined keeps the fake's H100 default. */
  name: string | undefined;
}

/** Parses "<count>[x<name>]"; empty means no simulation. Throws RangeError on nonsense. */
export function parseSimulatedGpus(value: string): SimulatedGpus | undefined {
  if (value === '') return undefined;
  const match = /^(\d+)(?:x(.+))?$/.exec(value);
  if (!match) throw new RangeError(`SVC_SIMULATE_GPUS must be <count>[x<NVML name>], got ${JSON.stringify(value)}`);
  const count = Number(match[1]);
  if (count > 8) throw new RangeError(`SVC_SIMULATE_GPUS: the fake NVML has at most 8 GPUs, got ${count}`);
  return { count, name: match[2] };
}

/**
 * Builds the fake library and gives it the simulated GPUs through a state file in the
 * agent's data dir (simulated-gpus.state), so a developer can script them while the agent
 * runs: change values, queue an XID (format: node-agent/nvml/README.md). A FAKE_NVML_STATE
 * already in the environment (a test's own state file) wins. Returns the library path.
 */
export async function prepareSimulatedNvml(
  simulation: SimulatedGpus,
  dataDir: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ libraryPath: string; stateFile: string }> {
  const libraryPath = await buildFakeNvml();
  if (!env.FAKE_NVML_STATE) {
    mkdirSync(dataDir, { recursive: true, mode: 0o700 });
    const gpu = simulation.name ? { name: simulation.name } : {};
    const state = new FakeNvmlStateFile(join(dataDir, 'simulated-gpus.state'), { gpus: Array.from({ length: simulation.count }, () => ({ ...gpu })) });
    env.FAKE_NVML_STATE = state.path;
  }
  return { libraryPath, stateFile: env.FAKE_NVML_STATE! };
}
