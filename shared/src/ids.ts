// Identifiers and secrets: a readable prefix plus base62 randomness.
import { randomFillSync } from 'node:crypto';

const BASE62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

// Random bytes drawn from the CSPRNG in 4 KiB refills, as node's randomUUID caches its
// entropy: one system call per id was a measurable cost on the inference hot path.
const pool = Buffer.alloc(4096);
let poolOffset = pool.length;

function randomByte(): number {
  if (poolOffset === pool.length) {
    randomFillSync(pool);
    poolOffset = 0;
  }
  return pool[poolOffset++]!;
}

/**
 * `length` uniformly random base62 characters. Rejection sampling keeps the
 * distribution uniform (248 = 62 * 4), so 43 characters carry 256 bits.
 */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    const byte = randomByte();
    if (byte < 248) out += BASE62[byte % 62];
  }
  return out;
}

/** `org_3kT9…`: 20 base62 characters (~119 bits) are plenty for identifiers. */
export function newId(prefix: string): string {
  return `${prefix}_${randomBase62(20)}`;
}
