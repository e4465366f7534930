// The state-file writer: the text the C fake parses, and the event queue.
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { FakeNvmlStateFile, formatFakeNvmlState } from './fake-state.js';

let dir: string | undefined;
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
  dir = undefined;
});

describe('formatFakeNvmlState', () => {
  it('writes system values, GPU values in NVML units, failures and events', () => {
    const text = formatFakeNvmlState(
      {
        driverVersion: '550.54.15',
        cudaVersion: 12040,
        gpus: [
          { name: 'NVIDIA H100 80GB HBM3', powerUsageWatts: 612.5, remappedRowsPending: true, throttleReasons: 0x44 },
          { unsupported: ['power_limit', 'ecc'], errors: { temperature: 15 } },
        ],
      },
      [{ seq: 7, gpu: 1, type: 'xid', data: 79 }],
    );
    expect(text.split('\n').filter((line) => !line.startsWith('#'))).toEqual([
      'gpus=2',
      'driver_version=550.54.15',
      'cuda_version=12040',
      'gpu.0.name=NVIDIA H100 80GB HBM3',
      'gpu.0.power_usage=612500',
      'gpu.0.remapped_pending=1',
      'gpu.0.throttle_reasons=0x44',
      'gpu.1.unsupported=power_limit,ecc',
      'gpu.1.error.temperature=15',
      'event=7 1 xid 79',
      '',
    ]);
  });

  it('refuses more than 8 GPUs and values that would break the line format', () => {
    expect(() => formatFakeNvmlState({ gpus: Array(9).fill({}) })).toThrow(RangeError);
    expect(() => formatFakeNvmlState({ gpus: [{ name: 'a\ngpus=8' }] })).toThrow(RangeError);
    expect(() => formatFakeNvmlState({ gpus: [] }, [{ seq: 1, gpu: 8, type: 'xid' }])).toThrow(RangeError);
  });
});

describe('FakeNvmlStateFile', () => {
  it('numbers events from 1, keeps them across updates, and starts a fresh history', () => {
    dir = mkdtempSync(join(tmpdir(), 'fake-nvml-state-'));
    const path = join(dir, 'state');
    writeFileSync(`${path}.consumed`, '5 0 0 0 0 0 0 0\n');

    const file = new FakeNvmlStateFile(path, { gpus: [{}, {}] });
    expect(existsSync(`${path}.consumed`)).toBe(false);
    expect(file.injectXid(0, 79)).toBe(1);
    expect(file.injectEvent({ gpu: 1, type: 'ecc_single' })).toBe(2);
    file.updateGpu(1, { temperatureC: 90 });

    const lines = readFileSync(path, 'utf8').split('\n');
    expect(lines).toContain('gpu.1.temperature=90');
    expect(lines.filter((l) => l.startsWith('event='))).toEqual(['event=1 0 xid 79', 'event=2 1 ecc_single 0']);
    expect(() => file.updateGpu(2, {})).toThrow(RangeError);
  });

  it('keeps only the most recent 128 events', () => {
    dir = mkdtempSync(join(tmpdir(), 'fake-nvml-state-'));
    const file = new FakeNvmlStateFile(join(dir, 'state'), { gpus: [{}] });
    for (let i = 0; i < 130; i++) file.injectXid(0, 13);
    const events = readFileSync(file.path, 'utf8').split('\n').filter((l) => l.startsWith('event='));
    expect(events).toHaveLength(128);
    expect(events[0]).toBe('event=3 0 xid 13');
  });
});
