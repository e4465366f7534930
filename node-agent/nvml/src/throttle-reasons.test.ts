import { describe, expect, it } from 'vitest';
import { decodeThrottleReasons } from './throttle-reasons.js';

describe('decodeThrottleReasons', () => {
  it('names the set bits in bit order', () => {
    expect(decodeThrottleReasons(0)).toEqual([]);
    expect(decodeThrottleReasons(0x1)).toEqual(['gpu_idle']);
    expect(decodeThrottleReasons(0x4 | 0x40 | 0x100)).toEqual(['sw_power_cap', 'hw_thermal_slowdown', 'display_clock_setting']);
  });

  it('ignores bits newer than its table', () => {
    expect(decodeThrottleReasons(0x8 | 0x10000)).toEqual(['hw_slowdown']);
  });
});
