import { describe, expect, it } from 'vitest';
import { normalizeEmail, roleMayOwnAdminKey, scopesOutsideRole } from './roles.js';

describe('normalizeEmail', () => {
  it.each([
    ['Ada@Example.COM', 'ada@example.com'],
    ['  bob.smith+ci@mail.example.co.uk ', 'bob.smith+ci@mail.example.co.uk'],
    ['x@a-b.io', 'x@a-b.io'],
  ])('keeps %s as %s', (input, stored) => expect(normalizeEmail(input)).toBe(stored));

  it.each(['', 'ada', 'ada@', '@example.com', 'ada@example', 'ada@@example.com', 'a da@example.com', '.ada@example.com', 'a..da@example.com', 'ada@-example.com', 'ada@example..com', `${'a'.repeat(65)}@example.com`, 'ada@exa mple.com'])(
    'refuses %j',
    (input) => expect(normalizeEmail(input)).toBeNull(),
  );
});

describe('role scopes', () => {
  it.each([
    ['admin', ['admin:write', 'billing:read', 'compute:write'], []],
    ['developer', ['inference:write', 'compute:write', 'billing:read', 'admin:write'], ['billing:read', 'admin:write']],
    ['billing', ['billing:read', 'inference:read'], ['inference:read']],
    ['viewer', ['inference:read', 'compute:read', 'billing:read', 'inference:write', 'compute:write'], ['inference:write', 'compute:write']],
  ] as const)('%s: outside of %j is %j', (role, scopes, outside) => {
    expect(scopesOutsideRole(role, scopes)).toEqual(outside);
  });

  it('lets only admins own admin keys', () => {
    expect([roleMayOwnAdminKey('admin'), roleMayOwnAdminKey('developer'), roleMayOwnAdminKey('billing'), roleMayOwnAdminKey('viewer')]).toEqual([true, false, false, false]);
  });
});
