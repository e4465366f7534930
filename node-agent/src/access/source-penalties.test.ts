import { describe, expect, it } from 'vitest';
import { parseCidr, parsePenaltyDuration, parsePenaltyPolicy, SourcePenalties, type PenaltyPolicy } from './source-penalties.js';

type Kind = 'noauth' | 'authfail';
const POLICY: PenaltyPolicy<Kind> = { durations: { noauth: 1_000, authfail: 5_000 }, minMs: 15_000, maxMs: 600_000, maxSources: 1_000, exempt: [] };

function box(policy: Partial<PenaltyPolicy<Kind>> = {}) {
  let now = 1_000_000;
  const penalties = new SourcePenalties({ ...POLICY, ...policy }, () => now);
  return { penalties, advance: (ms: number) => (now += ms) };
}

describe('SourcePenalties', () => {
  it('admits a source until its penalty exceeds min, then refuses it until the penalty drains', () => {
    const { penalties, advance } = box();
    for (let i = 0; i < 15; i++) expect(penalties.penalize('203.0.113.7', 'noauth')).toBeNull();
    expect(penalties.refusedFor('203.0.113.7')).toBeNull();
    expect(penalties.penalize('203.0.113.7', 'noauth')).toEqual({ ms: 16_000, site: false });
    expect(penalties.refusedFor('203.0.113.7')).toEqual({ ms: 16_000, site: false });
    advance(15_999);
    expect(penalties.refusedFor('203.0.113.7')).toEqual({ ms: 1, site: false });
    advance(1);
    expect(penalties.refusedFor('203.0.113.7')).toBeNull();
    expect(penalties.size).toBe(0);
  });

  it('drains in real time: one bad connection a second never adds up', () => {
    const { penalties, advance } = box();
    for (let i = 0; i < 100; i++) {
      penalties.penalize('203.0.113.7', 'noauth');
      expect(penalties.refusedFor('203.0.113.7')).toBeNull();
      advance(1_000);
    }
  });

  it('weighs failed logins more than connections that only left', () => {
    const { penalties } = box();
    for (let i = 0; i < 3; i++) penalties.penalize('203.0.113.7', 'authfail');
    expect(penalties.refusedFor('203.0.113.7')).toBeNull();
    expect(penalties.penalize('203.0.113.7', 'authfail')).toEqual({ ms: 20_000, site: false });
    expect(penalties.refusedFor('203.0.113.7')).toEqual({ ms: 20_000, site: false });
    // Already refused: a further ending lengthens it but starts nothing.
    expect(penalties.penalize('203.0.113.7', 'authfail')).toBeNull();
  });

  it('caps the penalty at max', () => {
    const { penalties } = box({ maxMs: 30_000 });
    for (let i = 0; i < 1_000; i++) penalties.penalize('203.0.113.7', 'authfail');
    expect(penalties.refusedFor('203.0.113.7')).toEqual({ ms: 30_000, site: false });
  });

  it('counts an IPv6 client by its /64 and an IPv4-mapped one by its IPv4 address', () => {
    const { penalties } = box();
    for (let i = 0; i < 4; i++) penalties.penalize(`2001:db8:1:2::${i + 1}`, 'authfail');
    expect(penalties.refusedFor('2001:db8:1:2:ffff::9')).toEqual({ ms: 20_000, site: false });
    expect(penalties.refusedFor('2001:db8:1:3::1')).toBeNull();
    for (let i = 0; i < 4; i++) penalties.penalize('::ffff:198.51.100.4', 'authfail');
    expect(penalties.refusedFor('198.51.100.4')).toEqual({ ms: 20_000, site: false });
  });

  it('never penalizes an exempt address or network', () => {
    const { penalties } = box({ exempt: ['198.51.100.0/24', '2001:db8:9::/48', '192.0.2.1'] });
    for (const address of ['198.51.100.200', '::ffff:198.51.100.3', '2001:db8:9:1::1', '192.0.2.1']) {
      for (let i = 0; i < 10; i++) expect(penalties.penalize(address, 'authfail')).toBeNull();
      expect(penalties.refusedFor(address)).toBeNull();
    }
    for (let i = 0; i < 4; i++) penalties.penalize('192.0.2.2', 'authfail');
    expect(penalties.refusedFor('192.0.2.2')?.ms).toBeGreaterThan(0);
  });

  it("refuses an IPv6 site (its /48) as a whole once its networks together fail faster than four clients could, though none alone is refused", () => {
    const { penalties, advance } = box();
    // Each /64 of the /48 fails three logins (15 s: at min, not past it) and moves on.
    const refusals = [];
    for (let n = 1; n <= 5; n++) {
      for (let i = 0; i < 3; i++) refusals.push(penalties.penalize(`2001:db8:aa:${n}::1`, 'authfail'));
      advance(100);
    }
    // The site's threshold is 4 x 15 s and it drains 4 ms a ms: after the fourth network
    // it stood at 60 - 1.2 s; the fifth network's first failure takes it to 63.4 s, which
    // lasts 63.4 / 4 s.
    expect(refusals.filter(Boolean)).toEqual([{ ms: 15_850, site: true }]);
    expect(refusals.findIndex(Boolean)).toBe(12);
    // Every network of the site is refused now, one that never connected too; not another
    // site's. Its two later failures lengthened it (+10 s / 4), and 100 ms went by.
    expect(penalties.refusedFor('2001:db8:aa:ffff::9')).toEqual({ ms: 18_250, site: true });
    expect(penalties.refusedFor('2001:db8:aa:1::1')).toEqual({ ms: 18_250, site: true });
    expect(penalties.refusedFor('2001:db8:ab:1::1')).toBeNull();
    advance(18_250);
    expect(penalties.refusedFor('2001:db8:aa:ffff::9')).toBeNull();
  });

  it('leaves alone a site whose networks together fail no faster than four clients may', () => {
    const { penalties, advance } = box();
    // Four /64s failing a login every 5 s each (each at its own drain rate): never refused, nor is their site.
    for (let round = 0; round < 100; round++) {
      for (let n = 1; n <= 4; n++) expect(penalties.penalize(`2001:db8:bb:${n}::1`, 'authfail')).toBeNull();
      advance(5_000);
    }
    expect(penalties.refusedFor('2001:db8:bb:9::1')).toBeNull();
  });

  it('an IPv4 source has no site beyond itself: many addresses of one /24 are refused one by one', () => {
    const { penalties } = box();
    for (let n = 1; n <= 20; n++) for (let i = 0; i < 3; i++) expect(penalties.penalize(`198.51.100.${n}`, 'authfail')).toBeNull();
    expect(penalties.refusedFor('198.51.100.21')).toBeNull();
  });

  it('remembers at most maxSources networks, forgetting the oldest', () => {
    const { penalties } = box({ maxSources: 3 });
    for (const address of ['192.0.2.1', '192.0.2.2', '192.0.2.3']) for (let i = 0; i < 4; i++) penalties.penalize(address, 'authfail');
    penalties.penalize('192.0.2.4', 'noauth');
    expect(penalties.size).toBe(3);
    expect(penalties.refusedFor('192.0.2.1')).toBeNull();
    expect(penalties.refusedFor('192.0.2.2')).toEqual({ ms: 20_000, site: false });
  });
});

describe('parsePenaltyPolicy', () => {
  const defaults = { durations: { noauth: 1_000, authfail: 5_000 }, minMs: 15_000, maxMs: 600_000, maxSources: 65_536 };

  it.each([
    ['', defaults],
    ['authfail:30s', { ...defaults, durations: { noauth: 1_000, authfail: 30_000 } }],
    ['noauth:250ms min:1m max:1h30m max-sources:10', { durations: { noauth: 250, authfail: 5_000 }, minMs: 60_000, maxMs: 5_400_000, maxSources: 10 }],
    ['  noauth:2   authfail:0s ', { ...defaults, durations: { noauth: 2_000, authfail: 0 } }],
  ])('%j', (text, expected) => {
    expect(parsePenaltyPolicy(text, defaults, ['10.0.0.0/8'])).toEqual({ ...expected, exempt: ['10.0.0.0/8'] });
  });

  it('off turns penalties off', () => {
    expect(parsePenaltyPolicy('off', defaults, [])).toBeNull();
  });

  it.each([
    ['crash:90s', /unknown penalty "crash" \(known: noauth, authfail, min, max, max-sources\)/],
    ['noauth', /"noauth" is not name:value/],
    ['noauth:1s:2', /is not name:value/],
    ['noauth:soon', /"soon" is not a duration/],
    ['max:5x', /"5x" is not a duration/],
    ['max-sources:0', /max-sources "0" is not a count/],
  ])('refuses %j', (text, message) => {
    expect(() => parsePenaltyPolicy(text, defaults, [])).toThrow(message);
  });
});

describe('parsePenaltyDuration and parseCidr', () => {
  it.each([
    ['15', 15_000],
    ['15s', 15_000],
    ['500ms', 500],
    ['10m', 600_000],
    ['1h30m', 5_400_000],
  ])('%s is %d ms', (text, ms) => expect(parsePenaltyDuration(text)).toBe(ms));

  it.each([
    ['10.1.2.0/24', { address: '10.1.2.0', prefix: 24, family: 'ipv4' }],
    ['10.1.2.3', { address: '10.1.2.3', prefix: 32, family: 'ipv4' }],
    ['2001:db8::/32', { address: '2001:db8::', prefix: 32, family: 'ipv6' }],
  ])('%s', (text, expected) => expect(parseCidr(text)).toEqual(expected));

  it.each([['10.1.2.0/33'], ['10.1.2/8'], ['2001:db8::/129'], ['host.example'], ['10.0.0.0/8/1'], ['10.0.0.0/']])('refuses %s', (text) => {
    expect(() => parseCidr(text)).toThrow(/is not an IP address or CIDR|prefix length/);
  });
});
