import { describe, expect, it } from 'vitest';
import { tbfArgs } from './task-bandwidth.js';

describe('tbfArgs', () => {
  it.each([
    // [Mbit/s, burst in bytes: 10 ms at the rate, at least one 64 KiB offload packet]
    [40, 65_536],
    [1_000, 1_250_000],
    [10_000, 12_500_000],
    [80_000, 100_000_000],
  ])('%i Mbit/s: a bucket of %i bytes', (mbps, burst) => {
    expect(tbfArgs('svci-0123456789', mbps)).toEqual(['qdisc', 'replace', 'dev', 'svci-0123456789', 'root', 'tbf', 'rate', `${mbps}mbit`, 'burst', String(burst), 'latency', '50ms']);
  });
});
