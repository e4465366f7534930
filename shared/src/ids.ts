// Identifiers and secrets: a readable prefix plus base62 randomness.
import { randomBytes } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

/**
 * `length` uniformly random base62 characters. Rejection sampling keeps the
 * distribution uniform (248 = 62 * 4), so 43 characters carry 256 bits.
 */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    for (const byte of randomBytes(length * 2)) {
      if (byte < 248) out += BASE62[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** `org_3kT9…`: 20 base62 characters (~119 bits) are plenty for identifiers. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(20)}`;
}
