// svcctl's pull progress bar (instances show --watch, instances list, instances show).
import { describe, expect, it } from 'vitest';
import { progressBar } from './instances.js';

describe('progressBar', () => {
  it.each<[string, number | null, string, number | undefined, string]>([
    ['nothing yet', 0, 'pulling', 10, '[----------]   0%  pulling'],
    ['under half a step rounds down', 0.04, 'pulling', 10, '[----------]   4%  pulling'],
    ['half a step rounds up', 0.05, 'pulling', 10, '[#---------]   5%  pulling'],
    ['a third', 1 / 3, 'pulling', 10, '[###-------]  33%  pulling'],
    ['nearly done', 0.996, 'extracting', 10, '[##########] 100%  extracting'],
    ['done', 1, 'starting', 10, '[##########] 100%  starting'],
    ['the default width (30)', 0.5, 'pulling', undefined, `[${'#'.repeat(15)}${'-'.repeat(15)}]  50%  pulling`],
    ['the list column width (12)', 0.25, 'pulling', 12, '[###---------]  25%  pulling'],
    ['over 1 is clamped, bar and percentage', 1.5, 'pulling', 10, '[##########] 100%  pulling'],
    ['below 0 is clamped', -0.2, 'pulling', 10, '[----------]   0%  pulling'],
    ['unknown (null): question marks, no percentage', null, 'provisioning', 10, '[??????????]  provisioning'],
    ['not a number: as unknown', Number.NaN, 'pulling', 10, '[??????????]  pulling'],
    ['infinite: as unknown', Number.POSITIVE_INFINITY, 'pulling', 10, '[??????????]  pulling'],
  ])('%s', (_label, fraction, phase, width, expected) => {
    expect(progressBar(fraction, phase, width)).toBe(expected);
  });

  it('is always the same width for a given width, whatever the fraction', () => {
    const lengths = new Set([0, 0.01, 0.1, 0.5, 0.99, 1].map((f) => progressBar(f, 'p', 20).length));
    expect(lengths.size).toBe(1);
  });
});
