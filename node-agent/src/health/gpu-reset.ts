// Resets one GPU the way operators do. NVML has no public reset call (nvidia-smi uses a
// private entry point), so the agent runs `nvidia-smi --gpu-reset -i <uuid>`: the driver
// refuses while any process holds the GPU, which is the safety check we want.
import { execFile } from 'node:child_process';

export interface GpuResetRun {
  ok: boolean;
  /** What the tool printed (stdout and stderr, trimmed, at most 2,000 characters). */
  output: string;
}

export type GpuResetter = (uuid: string) => Promise<GpuResetRun>;

/** nvidia-smi can take tens of seconds to reset a GPU with a large memory. */
export const GPU_RESET_TIMEOUT_MS = 120_000;

export function nvidiaSmiResetter(tool: string, timeoutMs = GPU_RESET_TIMEOUT_MS): GpuResetter {
  return (uuid) =>
    new Promise((resolve) => {
      execFile(tool, ['--gpu-reset', '-i', uuid], { timeout: timeoutMs, maxBuffer: 64 * 1024 }, (err, stdout, stderr) => {
        const printed = `${stdout}${stderr}`.trim();
        const why = err ? (printed || err.message) : printed;
        resolve({ ok: !err, output: why.slice(0, 2000) });
      });
    });
}
