// Commands from the control plane -> CommandResult. ResetGpuHealth clears the sticky
// health state (an operator's `svcctl nodes gpu reset-health`). ResetGpu resets the GPU
// itself (the control plane's remediation, only when nothing holds the GPU) and answers
// with its health as read afterwards. StartTask and StopTask
// are accepted at once; how they go is reported as task states (pulling ... running,
// stopping ... gone, or failed with the reason).
import type { Command__Output, CommandResult__Output, StartTask__Output, StopTask__Output } from '@svc/proto';
import type { GpuResetOutcome } from '../telemetry/gpu-monitor.js';

export type CommandResult = CommandResult__Output;

export interface CommandTargets {
  /** ResetGpu: resets the GPU and reads it again (see GpuMonitor.resetGpu). */
  resetGpu(uuid: string): Promise<GpuResetOutcome>;
  /** False when no GPU has that UUID; an empty UUID means every GPU. */
  resetGpuHealth(uuid: string): boolean;
  startTask(order: StartTask__Output): void;
  stopTask(order: StopTask__Output): void;
}

/** The answer, at once for every command but ResetGpu, which answers when the reset is done. */
export function handleCommand(command: Command__Output, targets: CommandTargets): CommandResult | Promise<CommandResult> {
  const result = (ok: boolean, error_code = '', error_message = ''): CommandResult => ({
    command_id: command.command_id,
    ok,
    error_code,
    error_message,
    gpu_healthy: false,
    gpu_health_reason: '',
    reset_output: '',
  });
  switch (command.body) {
    case 'reset_gpu_health': {
      const uuid = command.reset_gpu_health?.gpu_uuid ?? '';
      return targets.resetGpuHealth(uuid) ? result(true) : result(false, 'not_found', `this node has no GPU ${uuid}`);
    }
    case 'reset_gpu': {
      const uuid = command.reset_gpu?.gpu_uuid ?? '';
      if (!uuid) return result(false, 'invalid_argument', 'ResetGpu needs a GPU UUID');
      return targets.resetGpu(uuid).then((o) => ({
        ...result(o.ok, o.errorCode, o.errorMessage),
        gpu_healthy: o.healthy,
        gpu_health_reason: o.healthReason,
        reset_output: o.output,
      }));
    }
    case 'start_task':
      targets.startTask(command.start_task!);
      return result(true);
    case 'stop_task':
      targets.stopTask(command.stop_task!);
      return result(true);
    default:
      return result(false, 'unknown_command', `unknown command ${String(command.body)}`);
  }
}
