import { describe, expect, it } from 'vitest';
import { handleCommand } from './command-handler.js';

const known = new Set(['GPU-1']);
const resets: string[] = [];
const started: string[] = [];
const stopped: string[] = [];
const targets = {
  resetGpuHealth: (uuid: string) => {
    resets.push(uuid);
    return uuid === '' || known.has(uuid);
  },
  startTask: (order: { task_id: string }) => void started.push(order.task_id),
  stopTask: (order: { task_id: string }) => void stopped.push(order.task_id),
};

describe('handleCommand', () => {
  it.each([
    [{ command_id: 'c1', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-1' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c2', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: '' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c3', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-9' } }, { ok: false, error_code: 'not_found' }],
    [{ command_id: 'c4', body: 'start_task', start_task: { task_id: 'inst_1' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c5', body: 'stop_task', stop_task: { task_id: 'inst_1' } }, { ok: true, error_code: '' }],
    [{ command_id: 'c6' }, { ok: false, error_code: 'unknown_command' }],
  ] as const)('%j answers %j', (command, expected) => {
    const result = handleCommand(command as never, targets as never);
    expect(result).toMatchObject({ command_id: command.command_id, ...expected });
  });

  it('resets the GPU it names', () => {
    resets.length = 0;
    handleCommand({ command_id: 'c', body: 'reset_gpu_health', reset_gpu_health: { gpu_uuid: 'GPU-1' } } as never, targets as never);
    expect(resets).toEqual(['GPU-1']);
  });

  it('hands task orders to the task supervisor', () => {
    started.length = 0;
    stopped.length = 0;
    handleCommand({ command_id: 'a', body: 'start_task', start_task: { task_id: 'inst_9' } } as never, targets as never);
    handleCommand({ command_id: 'b', body: 'stop_task', stop_task: { task_id: 'inst_9' } } as never, targets as never);
    expect([started, stopped]).toEqual([['inst_9'], ['inst_9']]);
  });
});
