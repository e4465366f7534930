// OpenSSH public keys as both sides read them: the control plane when a tenant hands them
// in, the node agent's SSH gateway when it checks a login against them.
//
// An RSA key's public exponent is the key owner's choice, and checking a signature costs a
// modular exponentiation by it. Measured with Node's crypto: with a 3072-bit modulus and a
// 3072-bit exponent, 4.6 ms a signature, where a real key (exponent 65537) costs 0.07 ms;
// and a bogus signature costs as much to check as a good one, so a tenant who registered
// such a key could spend the gateway's one thread six logins a connection at a time.
// OpenSSL refuses exponents over 64 bits only for moduli over 3072 bits. Real keys use
// 65537 (ssh-keygen's, and FIPS 186-4's floor), so exponents are held to 32 bits, and
// moduli to OpenSSH's 16,384 bits (1.3 ms a signature).

export const MIN_RSA_BITS = 2048;
export const MAX_RSA_BITS = 16_384;
export const MAX_RSA_EXPONENT_BITS = 32;

/** Reads the SSH wire-format strings (uint32 length + bytes) at the start of a key blob; undefined when it is cut short. */
export function readSshStrings(blob: Buffer, count: number): Buffer[] | undefined {
  const out: Buffer[] = [];
  let offset = 0;
  for (let i = 0; i < count; i++) {
    if (offset + 4 > blob.length) return undefined;
    const length = blob.readUInt32BE(offset);
    offset += 4;
    if (offset + length > blob.length) return undefined;
    out.push(blob.subarray(offset, offset + length));
    offset += length;
  }
  return out;
}

/** The bit length of an unsigned big-endian integer (an SSH mpint's bytes). */
export function bitLength(value: Buffer): number {
  let i = 0;
  while (i < value.length && value[i] === 0) i++;
  if (i === value.length) return 0;
  return (value.length - i - 1) * 8 + (32 - Math.clz32(value[i]!));
}

/** Why an RSA public key (exponent and modulus, as in an `ssh-rsa` blob) is not taken, or undefined. */
export function rsaKeyProblem(exponent: Buffer, modulus: Buffer): string | undefined {
  const bits = bitLength(modulus);
  if (bits < MIN_RSA_BITS) return `RSA keys must have at least ${MIN_RSA_BITS} bits; this one has ${bits}`;
  if (bits > MAX_RSA_BITS) return `RSA keys may have at most ${MAX_RSA_BITS} bits; this one has ${bits}`;
  const e = bitLength(exponent);
  if (e > MAX_RSA_EXPONENT_BITS || e < 2 || (exponent[exponent.length - 1]! & 1) === 0) {
    return `an RSA key's public exponent must be odd, at least 3 and at most ${MAX_RSA_EXPONENT_BITS} bits (ssh-keygen uses 65537); this one has ${e} bits`;
  }
  return undefined;
}

/** Why an `ssh-rsa` key blob is not taken, or undefined (not an `ssh-rsa` blob: undefined too). */
export function rsaBlobProblem(blob: Buffer): string | undefined {
  const fields = readSshStrings(blob, 3);
  if (!fields || fields[0]!.toString('latin1') !== 'ssh-rsa') return undefined;
  return rsaKeyProblem(fields[1]!, fields[2]!);
}
