import { describe, expect, it } from 'vitest';
import { billedUntil } from './billing-end.js';

const READY = 1_000_000_000;
const H = 3_600_000;
const DAY = 24 * H;

describe('billedUntil(readyAt, stoppedAt, lastContact, now)', () => {
  it.each<[string, number | null, number | null, number | null, number, number | null]>([
    ['never ready: nothing billed', null, READY + H, null, READY + 2 * H, null],
    ['reported gone live, no stop time: now', READY, null, null, READY + H, READY + H],
    ['the container stopped as Docker saw it', READY, READY + H, null, READY + 2 * H, READY + H],
    // A node away 3 days: its last contact was 1 h after ready, the container really stopped 2 h after it.
    ['node away 3 days, real stop known: the real stop', READY, READY + 3 * H, READY + H, READY + 3 * DAY, READY + 3 * H],
    ['node away 3 days, stop unknown: its last contact', READY, null, READY + H, READY + 3 * DAY, READY + H],
    ['a stop time in the future (node clock ahead): now', READY, READY + 2 * H, null, READY + H, READY + H],
    ['a stop time before ready (clock behind): ready', READY, READY - H, null, READY + H, READY],
    ['a last contact before ready: ready', READY, null, READY - 5, READY + H, READY],
  ])('%s', (_, readyAt, stoppedAt, lastContact, now, expected) => {
    expect(billedUntil(readyAt, stoppedAt, lastContact, now)).toBe(expected);
  });
});
