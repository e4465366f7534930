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
