import { describe, expect, it } from 'vitest';
import { jupyterOrigin, portCandidates, portOrder } from './jupyter-origin.js';

describe('Jupyter origins', () => {
  it('gives every instance each port of the range once, starting where its id says', () => {
    const ports = portCandidates({ first: 8900, count: 100 }, 'inst_abc');
    expect(ports).toHaveLength(100);
    expect(new Set(ports).size).toBe(100);
    expect(Math.min(...ports)).toBe(8900);
    expect(Math.max(...ports)).toBe(8999);
    // The same id starts at the same port (an agent restart keeps the URL).
    expect(portCandidates({ first: 8900, count: 100 }, 'inst_abc')).toEqual(ports);
    // Different ids spread over the range rather than piling onto its first port.
    const starts = new Set(['inst_a', 'inst_b', 'inst_c', 'inst_d', 'inst_e', 'inst_f'].map((id) => portCandidates({ first: 8900, count: 100 }, id)[0]));
    expect(starts.size).toBeGreaterThan(1);
  });

  it('lets the OS pick when the range starts at 0', () => {
    expect(portCandidates({ first: 0, count: 100 }, 'inst_abc')).toEqual([0]);
  });

  it('tries the port an instance held before first, and ports other instances hold last', () => {
    const range = { first: 9000, count: 4 };
    const derived = portCandidates(range, 'inst_x');
    expect(portOrder(range, 'inst_x', new Map())).toEqual(derived);
    const [d0, d1, d2, d3] = derived as [number, number, number, number];
    // Held d2 before; another instance holds d0: d2, then the free ones in derived order, d0 last.
    expect(portOrder(range, 'inst_x', new Map([['inst_x', d2], ['inst_y', d0]]))).toEqual([d2, d1, d3, d0]);
    expect(portOrder({ first: 0, count: 4 }, 'inst_x', new Map([['inst_x', 41234]]))).toEqual([41234, 0]);
    // The range moved since: the old port is not tried.
    expect(portOrder(range, 'inst_x', new Map([['inst_x', 8890]]))).toEqual(derived);
  });

  it('makes one origin per port', () => {
    const cases: Array<[string, string, number, string]> = [
      ['', 'gpu7.example.com', 8917, 'http://gpu7.example.com:8917'],
      ['', '2001:db8::7', 8917, 'http://[2001:db8::7]:8917'],
      ['https://gpu7.example.com:{port}', 'ignored', 8917, 'https://gpu7.example.com:8917'],
      ['https://j{port}.gpu7.example.com', 'ignored', 8917, 'https://j8917.gpu7.example.com'],
    ];
    for (const [url, host, port, origin] of cases) expect(jupyterOrigin(url, host, port)).toBe(origin);
  });
});
