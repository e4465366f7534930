// Operator key values: a prefix no customer key can carry (`svcop_`), 256 bits of base62
// randomness, and the SHA-256 digest that is all the store keeps (like API keys).
import { hash } from 'node:crypto';
import { randomBase62 } from '@svc/shared/ids';
import type { OperatorScope } from '../store/operator-store.js';

export const OPERATOR_KEY_PREFIX = 'svcop_';
export const OPERATOR_SCOPES: readonly OperatorScope[] = ['operator:read', 'operator:write'];

const SECRET_LENGTH = 43;
const OPERATOR_KEY_PATTERN = /^svcop_[0-9A-Za-z]{43}$/;

export function generateOperatorKeyValue(): string {
  return OPERATOR_KEY_PREFIX + randomBase62(SECRET_LENGTH);
}

export const isOperatorKeyValue = (value: string): boolean => OPERATOR_KEY_PATTERN.test(value);

/** Anything that starts like an operator key, well-formed or not (to answer it clearly). */
export const looksLikeOperatorKey = (value: string): boolean => value.startsWith(OPERATOR_KEY_PREFIX);

export function hashOperatorKeyValue(value: string): Buffer {
  return hash('sha256', value, 'buffer');
}

export function isOperatorScope(value: string): value is OperatorScope {
  return (OPERATOR_SCOPES as readonly string[]).includes(value);
}

/** operator:write includes operator:read. */
export function grants(held: readonly OperatorScope[], wanted: OperatorScope): boolean {
  return held.includes(wanted) || (wanted === 'operator:read' && held.includes('operator:write'));
}
