import { describe, expect, it } from 'vitest';
import { ApiError, ManualClock, SITE_SHARE } from '@svc/shared';
import { UnknownKeyGuard } from './unknown-key-guard.js';

const refusal = (guard: UnknownKeyGuard, address: string): ApiError | undefined => {
  try {
    guard.check(address);
    return undefined;
  } catch (err) {
    return err as ApiError;
  }
};

describe('UnknownKeyGuard', () => {
  it('lets an address have a burst of unknown keys looked up, then one per refill interval', () => {
    const clock = new ManualClock(1_000_000);
    const guard = new UnknownKeyGuard(clock, 6);
    for (let i = 0; i < 6; i++) {
      expect(refusal(guard, '203.0.113.7')).toBeUndefined();
      guard.unknown('203.0.113.7');
    }
    const refused = refusal(guard, '203.0.113.7');
    expect(refused).toMatchObject({ type: 'rate_limited', status: 429, headers: { 'retry-after': '10' } });
    expect(refused!.message).toContain('203.0.113.7');
    expect(refusal(guard, '198.51.100.1')).toBeUndefined(); // other addresses are not affected
    clock.advance(9_999);
    expect(refusal(guard, '203.0.113.7')?.headers).toEqual({ 'retry-after': '1' });
    clock.advance(1);
    expect(refusal(guard, '203.0.113.7')).toBeUndefined();
    guard.unknown('203.0.113.7');
    expect(refusal(guard, '203.0.113.7')).toBeDefined();
  });

  it('counts an IPv6 client by its /64, and an IPv4-mapped address as the IPv4 one', () => {
    const clock = new ManualClock(1_000_000);
    const guard = new UnknownKeyGuard(clock, 3);
    // A fresh address from the same /64 for every key: one bucket all the same.
    for (let i = 1; i <= 3; i++) {
      expect(refusal(guard, `2001:db8:7:1::${i}`)).toBeUndefined();
      guard.unknown(`2001:db8:7:1::${i}`);
    }
    const refused = refusal(guard, '2001:db8:7:1:abcd::99');
    expect(refused).toMatchObject({ type: 'rate_limited', status: 429 });
    expect(refused!.message).toContain('from 2001:db8:7:1::/64 ');
    expect(refusal(guard, '2001:db8:7:2::1')).toBeUndefined(); // the next /64 is another client
    for (let i = 0; i < 3; i++) guard.unknown('::ffff:198.51.100.4');
    expect(refusal(guard, '198.51.100.4')).toBeDefined();
  });

  it('counts an IPv6 site (its /48) too, so fresh /64s do not bring fresh buckets', () => {
    const clock = new ManualClock(1_000_000);
    const guard = new UnknownKeyGuard(clock, 2);
    const share = 2 * SITE_SHARE;
    // One party cycling through the /64s of its /48, one unknown key from each.
    for (let i = 1; i <= share; i++) {
      expect(refusal(guard, `2001:db8:9:${i.toString(16)}::1`)).toBeUndefined();
      guard.unknown(`2001:db8:9:${i.toString(16)}::1`);
    }
    const refused = refusal(guard, '2001:db8:9:ffff::1');
    expect(refused).toMatchObject({ type: 'rate_limited', status: 429, headers: { 'retry-after': '8' } });
    expect(refused!.message).toContain(`from 2001:db8:9::/48 (${share} per minute)`);
    expect(refusal(guard, '2001:db8:a:1::1')).toBeUndefined(); // the next /48 is another site
    clock.advance(7_500); // a site's token every 60 s / 8
    expect(refusal(guard, '2001:db8:9:ffff::1')).toBeUndefined();
  });

  it('stays bounded under a flood from more clients than it tracks, and keeps holding back the busiest', () => {
    const clock = new ManualClock(1_000_000);
    const guard = new UnknownKeyGuard(clock, 1);
    guard.unknown('198.51.100.9');
    for (let i = 0; i < 20_000; i++) {
      guard.unknown(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
      if (i % 100 === 0) guard.unknown('198.51.100.9'); // still counted: never the least recent
    }
    expect(refusal(guard, '198.51.100.9')).toMatchObject({ status: 429 });
    // The least recently counted were forgotten one at a time: a fresh burst for them only.
    expect(refusal(guard, '10.0.0.0')).toBeUndefined();
    expect(refusal(guard, '10.0.78.31')).toMatchObject({ status: 429 }); // 19,999: recent, still held back
  });
});
