// Fields OpenAI defines that a route here does not serve: SDKs and tools send many of them
// at their neutral value by default (`store: false`, `service_tier: "auto"`), so they are
// accepted at that value and otherwise refused by name, saying why. One table per route.
import { Type } from '@sinclair/typebox';
import { ApiError } from '@svc/shared';

export interface NeutralRule {
  neutral: (value: unknown) => boolean;
  why: string;
}

/** The schema of such a field: anything, checked by refuseNonNeutral. */
export const Refusable = (description: string) => Type.Optional(Type.Unknown({ description: `Refused unless neutral: ${description}` }));

/** `rules` as refuseNonNeutral takes them, made once: the chat route runs it on every request. */
export const neutralRules = (rules: Readonly<Record<string, NeutralRule>>): ReadonlyArray<readonly [string, NeutralRule]> => Object.entries(rules);

/** Refuses the first field of `rules` that `body` sends at a value other than its neutral one. */
export function refuseNonNeutral(body: object, rules: ReadonlyArray<readonly [string, NeutralRule]>): void {
  for (const [param, rule] of rules) {
    const value = (body as Record<string, unknown>)[param];
    if (value !== undefined && !rule.neutral(value)) throw new ApiError('invalid_request', `${param} is not supported: ${rule.why}`, { param });
  }
}
