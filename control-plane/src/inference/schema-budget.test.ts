import { describe, expect, it } from 'vitest';
import { ManualClock } from '@svc/shared';
import { ApiError } from '@svc/shared/errors';
import { SchemaBudget } from './schema-budget.js';

const refusal = (fn: () => void): ApiError | undefined => {
  try {
    fn();
    return undefined;
  } catch (err) {
    return err as ApiError;
  }
};

describe('SchemaBudget', () => {
  it("takes an org's new schema bytes up to its budget a minute, then refuses with 429 schema_budget and when to retry", () => {
    const clock = new ManualClock(0);
    const meter = new SchemaBudget(100_000, clock).meterFor('org_a');
    meter(60_000);
    meter(40_000);
    const refused = refusal(() => meter(30_000));
    expect(refused).toMatchObject({ status: 429, type: 'rate_limited', code: 'schema_budget' });
    // 30,000 bytes come back in 18 s.
    expect(refused!.headers['retry-after']).toBe('18');
    clock.advance(18_000);
    expect(refusal(() => meter(30_000))).toBeUndefined();
  });

  it('keeps each organization to its own budget, and refills to no more than a minute of it', () => {
    const clock = new ManualClock(0);
    const budget = new SchemaBudget(100_000, clock);
    budget.meterFor('org_a')(100_000);
    expect(refusal(() => budget.meterFor('org_b')(100_000))).toBeUndefined();
    clock.advance(10 * 60_000);
    const a = budget.meterFor('org_a');
    a(100_000);
    expect(refusal(() => a(1))).toMatchObject({ code: 'schema_budget' });
  });

  it('refuses a single schema larger than a whole minute of budget', () => {
    expect(refusal(() => new SchemaBudget(1_000, new ManualClock(0)).meterFor('org_a')(1_001))).toMatchObject({ code: 'schema_budget' });
  });
});
