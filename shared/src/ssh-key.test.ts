import { describe, expect, it } from 'vitest';
import { bitLength, rsaBlobProblem, rsaKeyProblem } from './ssh-key.js';

/** An unsigned big-endian integer of exactly `bits` bits, odd, as an SSH mpint carries it (a 0 byte before a high bit). */
function integer(bits: number): Buffer {
  const bytes = Buffer.alloc(Math.ceil(bits / 8), 0x5a);
  bytes[0] = 1 << ((bits - 1) % 8) | (bytes[0]! & ((1 << ((bits - 1) % 8)) - 1));
  bytes[bytes.length - 1]! |= 1;
  return bytes[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), bytes]) : bytes;
}

const field = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, b.length >> 8, b.length & 0xff]), b]);

describe('bitLength', () => {
  it.each([
    [Buffer.from([]), 0],
    [Buffer.from([0, 0]), 0],
    [Buffer.from([1]), 1],
    [Buffer.from([0x01, 0x00, 0x01]), 17],
    [Buffer.from([0, 0x80, 0]), 16],
  ])('%o has %i bits', (value, bits) => expect(bitLength(value)).toBe(bits));

  it.each([2048, 3072, 16_384, 16_385])('reads back %i bits', (bits) => expect(bitLength(integer(bits))).toBe(bits));
});

describe('rsaKeyProblem', () => {
  const e65537 = Buffer.from([0x01, 0x00, 0x01]);
  it.each([
    ['ssh-keygen\'s 3072-bit key', e65537, integer(3072), undefined],
    ['exponent 3', Buffer.from([3]), integer(2048), undefined],
    ['a 32-bit exponent', integer(32), integer(4096), undefined],
    ['the largest modulus OpenSSH takes', e65537, integer(16_384), undefined],
    ['a 1024-bit modulus', e65537, integer(1024), 'RSA keys must have at least 2048 bits; this one has 1024'],
    ['a modulus past OpenSSH\'s', e65537, integer(16_385), 'RSA keys may have at most 16384 bits; this one has 16385'],
    ['a 3072-bit exponent (4.6 ms a signature to check)', integer(3072), integer(3072), "an RSA key's public exponent must be odd, at least 3 and at most 32 bits (ssh-keygen uses 65537); this one has 3072 bits"],
    ['a 33-bit exponent', integer(33), integer(2048), "an RSA key's public exponent must be odd, at least 3 and at most 32 bits (ssh-keygen uses 65537); this one has 33 bits"],
    ['an even exponent', Buffer.from([0x01, 0x00, 0x00]), integer(2048), "an RSA key's public exponent must be odd, at least 3 and at most 32 bits (ssh-keygen uses 65537); this one has 17 bits"],
    ['exponent 1', Buffer.from([1]), integer(2048), "an RSA key's public exponent must be odd, at least 3 and at most 32 bits (ssh-keygen uses 65537); this one has 1 bits"],
  ])('%s', (_name, exponent, modulus, problem) => {
    expect(rsaKeyProblem(exponent, modulus)).toBe(problem);
    expect(rsaBlobProblem(Buffer.concat([field(Buffer.from('ssh-rsa')), field(exponent), field(modulus)]))).toBe(problem);
  });

  it('leaves blobs that are not ssh-rsa to their own checks', () => {
    expect(rsaBlobProblem(Buffer.concat([field(Buffer.from('ssh-ed25519')), field(Buffer.alloc(32))]))).toBeUndefined();
    expect(rsaBlobProblem(Buffer.from([0, 0]))).toBeUndefined();
  });
});
