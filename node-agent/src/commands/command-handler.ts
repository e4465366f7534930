// Commands from the control plane -> CommandResult. ResetGpuHealth clears the sticky
// health state (an operator's `svcctl nodes gpu reset-health`). StartTask and StopTask
// are accepted at once; how they go is reported as task states (pulling ... running,
// stopping ... gone, or failed with the reason).
import type { Command__Output, CommandResult__Output, StartTask__Output, StopTask__Output } from '@svc/proto';

export type CommandResult = CommandResult__Output;

export interface CommandTargets {
  /** False when no GPU has that UUID; an empty UUID means every GPU. */
  resetGpuHealth(uuid: string): boolean;
  startTask(order: StartTask__Output): void;
  stopTask(order: StopTask__Output): void;
}

export function handleCommand(command: Command__Output, targets: CommandTargets): CommandResult {
  const result = (ok: boolean, error_code = '', error_message = ''): CommandResult => ({
    command_id: command.command_id,
    ok,
    error_code,
    error_message,
  });
  switch (command.body) {
    case 'reset_gpu_health': {
      const uuid = command.reset_gpu_health?.gpu_uuid ?? '';
      return targets.resetGpuHealth(uuid) ? result(true) : result(false, 'not_found', `this node has no GPU ${uuid}`);
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
