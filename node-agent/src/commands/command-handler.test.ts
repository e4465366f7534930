import { describe, expect, it } from 'vitest';
import { handleCommand } from './command-handler.js';

const known = new Set(['GPU-1']);
const resets: string[] = [];
const targets = {
  resetGpuHealth: (uuid: string) => {
    resets.push(uuid);
    return uuid === '' || known.has(uuid);
  },
};

describe('handleCommand', () => {
  it.each([
    [{ command_id: 'c1', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-1' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c2', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: '' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c3', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-9' } }, { ok: false, error_code: 'not_found' }],
    [{ command_id: 'c4', body: 'start_task', start_task: {} }, { ok: false, error_code: 'unimplemented' }],
    [{ command_id: 'c5', body: 'stop_task', stop_task: {} }, { ok: false, error_code: 'unimplemented' }],
    [{ command_id: 'c6' }, { ok: false, error_code: 'unknown_command' }],
  ] as const)('%j answers %j', (command, expected) => {
    const result = handleCommand(command as never, targets);
    expect(result).toMatchObject({ command_id: command.command_id, ...expected });
  });

  it('resets the GPU it names', () => {
    resets.length = 0;
    handleCommand({ command_id: 'c', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-1' } }, targets);
    expect(resets).toEqual(['GPU-1']);
  });
});
