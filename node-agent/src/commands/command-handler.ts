// Commands from the control plane -> CommandResult. ResetGpuHealth clears the sticky
// health state (an operator's `svcctl nodes gpu reset-health`); running tasks comes with
// the Docker runtime, so StartTask/StopTask answer "unimplemented" until then.
import type { Command__Output, CommandResult__Output } from '@svc/proto';

export type CommandResult = CommandResult__Output;

export interface CommandTargets {
  /** False when no GPU has that UUID; an empty UUID means every GPU. */
  resetGpuHealth(uuid: string): boolean;
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
    case 'stop_task':
      return result(false, 'unimplemented', `${command.body} is not implemented by this agent yet`);
    default:
      return result(false, 'unknown_command', `unknown command ${String(command.body)}`);
  }
}
