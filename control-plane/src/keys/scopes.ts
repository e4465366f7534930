// The scopes of the spec's Authentication section and the rules on who may hold them.
export const SCOPES = [
  'inference:write',
  'inference:read',
  'compute:write',
  'compute:read',
  'billing:read',
  'admin:write',
] as const;

export type Scope = (typeof SCOPES)[number];

export const DEFAULT_SCOPES: Scope[] = ['inference:write', 'inference:read'];

/** Public (browser) keys may embed and list models, nothing else. */
export const PUBLIC_KEY_SCOPES: ReadonlySet<Scope> = new Set(['inference:write', 'inference:read']);

export function isScope(value: string): value is Scope {
  return (SCOPES as readonly string[]).includes(value);
}

/**
 * Sandbox (test) keys are free (spec: "Free; capped; deterministic mock outputs"), and a GPU
 * instance is real, billed hardware: they may not create or change instances.
 */
export const SANDBOX_REFUSED_SCOPES: ReadonlySet<Scope> = new Set(['compute:write']);

export const SANDBOX_REFUSAL = 'sandbox keys (svc_sk_test_) are free and cannot create or change GPU instances, which are real, billed hardware; use a live key (svc_sk_live_)';
