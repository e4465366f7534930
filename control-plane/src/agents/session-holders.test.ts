import { describe, expect, it } from 'vitest';
import { announcements, parseRelayMessage, SessionHolders, STAMPS_PER_MESSAGE, type RelayMessage } from './session-holders.js';

describe('parseRelayMessage', () => {
  it.each<[string, RelayMessage | null]>([
    ['{"t":"cmd","n":"node_1"}', { t: 'cmd', n: 'node_1' }],
    ['{"t":"attach","r":"cpr_a","s":[["node_1",5]]}', { t: 'attach', r: 'cpr_a', s: [['node_1', 5]] }],
    ['{"t":"detach","r":"cpr_a","s":[]}', { t: 'detach', r: 'cpr_a', s: [] }],
    ['{"t":"rollcall","r":"cpr_b"}', { t: 'rollcall', r: 'cpr_b' }],
    // Malformed or unknown: ignored, never thrown.
    ['not json', null],
    ['null', null],
    ['{"t":"cmd"}', null],
    ['{"t":"attach","r":"cpr_a","s":[["node_1","5"]]}', null],
    ['{"t":"attach","r":"cpr_a","s":[["node_1"]]}', null],
    ['{"t":"rollcall"}', null],
    ['{"t":"drop_tables","r":"x"}', null],
  ])('%s', (text, expected) => {
    expect(parseRelayMessage(text)).toEqual(expected);
  });
});

describe('announcements', () => {
  it('splits many sessions into messages that each fit a NOTIFY payload', () => {
    const stamps = Array.from({ length: STAMPS_PER_MESSAGE * 2 + 1 }, (_, i): [string, number] => [`node_${'x'.repeat(20)}${i}`, 1_800_000_000_000 + i]);
    const messages = announcements('attach', 'cpr_abcdefghijklmnopqrst', stamps);
    expect(messages).toHaveLength(3);
    expect(messages.flatMap((m) => (m.t === 'attach' ? m.s : []))).toEqual(stamps);
    for (const m of messages) expect(Buffer.byteLength(JSON.stringify(m))).toBeLessThan(8000);
    expect(announcements('detach', 'cpr_a', [])).toEqual([]);
  });
});

describe('SessionHolders', () => {
  const attach = (r: string, node: string, since: number): RelayMessage => ({ t: 'attach', r, s: [[node, since]] });
  const detach = (r: string, node: string, since: number): RelayMessage => ({ t: 'detach', r, s: [[node, since]] });

  it.each<[string, RelayMessage[], string | undefined]>([
    ['an announced session', [attach('A', 'n', 10)], 'A'],
    ['the agent moved: the newer session wins', [attach('A', 'n', 10), attach('B', 'n', 20)], 'B'],
    ['announcements out of order: the newer session still wins', [attach('B', 'n', 20), attach('A', 'n', 10)], 'B'],
    ['the session ended', [attach('A', 'n', 10), detach('A', 'n', 10)], undefined],
    ['a late end from the replica the agent left does not erase the new holder', [attach('A', 'n', 10), attach('B', 'n', 20), detach('A', 'n', 10)], 'B'],
    ['the end of an older session of the same replica changes nothing', [attach('A', 'n', 20), detach('A', 'n', 10)], 'A'],
    ['commands and roll calls change nothing', [attach('A', 'n', 10), { t: 'cmd', n: 'n' }, { t: 'rollcall', r: 'B' }], 'A'],
  ])('%s', (_, messages, holder) => {
    const table = new SessionHolders();
    for (const m of messages) table.apply(m);
    expect(table.holderOf('n')?.replica).toBe(holder);
  });
});
