// How `svcctl nodes show` says where a node's clock stands against the control plane's.
import { describe, expect, it } from 'vitest';
import { clockLine } from './nodes.js';

describe('clockLine', () => {
  it.each<[number | null, string]>([
    [null, '-'],
    [0, "in step with the control plane's (within 1 s)"],
    [-3_600_250, "3600.3 s behind the control plane's: run NTP on the node (billing reads its times on the control plane's clock)"],
    [1_500, "1.5 s ahead of the control plane's: run NTP on the node (billing reads its times on the control plane's clock)"],
  ])('%s ms: %s', (offset, line) => expect(clockLine(offset)).toBe(line));
});
