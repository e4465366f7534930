// Weight encodings the test models are written in: IEEE half floats (F16) and
// ggml's Q8_0 and Q4_0 block quantizations, byte for byte as ggml's reference
// quantizers (ggml-quants.c) write them, plus the inverse for tests.

/** Values per quantization block (QK8_0 = QK4_0 = 32 in ggml). */
export const BLOCK_SIZE = 32;
/** Bytes per block: a half-float scale then 32 int8 values. */
export const Q8_0_BLOCK_BYTES = 2 + BLOCK_SIZE;
/** Bytes per block: a half-float scale then 32 four-bit values packed in pairs. */
export const Q4_0_BLOCK_BYTES = 2 + BLOCK_SIZE / 2;

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** Float32 -> IEEE 754 binary16 bits, round to nearest even (what ggml's FP32_TO_FP16 does). */
export function f32ToF16(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exp = (x >>> 23) & 0xff;
  let mant = x & 0x7fffff;
  if (exp === 0xff) return sign | 0x7c00 | (mant ? 0x200 : 0); // inf / nan
  let e = exp - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00; // overflow -> inf
  if (e <= 0) {
    // Subnormal half (or zero): shift the implicit bit in, then round.
    if (e < -10) return sign;
    mant |= 0x800000;
    const shift = 14 - e;
    let half = mant >>> shift;
    const rest = mant & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1))) half++;
    return sign | half;
  }
  let half = (e << 10) | (mant >>> 13);
  const rest = mant & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1))) half++; // may carry into the exponent: still correct
  return sign | half;
}

/** IEEE 754 binary16 bits -> number. */
export function f16ToF32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exp = (bits >>> 10) & 0x1f;
  const mant = bits & 0x3ff;
  if (exp === 0) return sign * mant * 2 ** -24;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  return sign * (1 + mant / 1024) * 2 ** (exp - 15);
}

function checkBlocks(values: Float32Array): void {
  if (values.length % BLOCK_SIZE !== 0) {
    throw new Error(`quantized tensors need a multiple of ${BLOCK_SIZE} values, got ${values.length}`);
  }
}

export function encodeF16(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setUint16(i * 2, f32ToF16(values[i]!), true);
  return out;
}

export function encodeF32(values: Float32Array): Uint8Array {
  const out = new Uint8Array(values.length * 4);
  const view = new DataView(out.buffer);
  for (let i = 0; i < values.length; i++) view.setFloat32(i * 4, values[i]!, true);
  return out;
}

/** ggml quantize_row_q8_0_ref: scale d = amax/127, q = round(x/d). */
export function quantizeQ8_0(values: Float32Array): Uint8Array {
  checkBlocks(values);
  const blocks = values.length / BLOCK_SIZE;
  const out = new Uint8Array(blocks * Q8_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    let amax = 0;
    for (let j = 0; j < BLOCK_SIZE; j++) amax = Math.max(amax, Math.abs(values[b * BLOCK_SIZE + j]!));
    const d = Math.fround(amax / 127);
    const id = d ? Math.fround(1 / d) : 0;
    const at = b * Q8_0_BLOCK_BYTES;
    view.setUint16(at, f32ToF16(d), true);
    for (let j = 0; j < BLOCK_SIZE; j++) {
      // C's roundf rounds halves away from zero; Math.round rounds them up.
      const x = Math.fround(values[b * BLOCK_SIZE + j]! * id);
      view.setInt8(at + 2 + j, Math.sign(x) * Math.round(Math.abs(x)));
    }
  }
  return out;
}

/** ggml quantize_row_q4_0_ref: d = (signed value of largest magnitude) / -8, q = x/d + 8 in 0..15. */
export function quantizeQ4_0(values: Float32Array): Uint8Array {
  checkBlocks(values);
  const blocks = values.length / BLOCK_SIZE;
  const half = BLOCK_SIZE / 2;
  const out = new Uint8Array(blocks * Q4_0_BLOCK_BYTES);
  const view = new DataView(out.buffer);
  for (let b = 0; b < blocks; b++) {
    let amax = 0;
    let max = 0;
    for (let j = 0; j < BLOCK_SIZE; j++) {
      const v = values[b * BLOCK_SIZE + j]!;
      if (amax < Math.abs(v)) {
        amax = Math.abs(v);
        max = v;
      }
    }
    const d = Math.fround(max / -8);
    const id = d ? Math.fround(1 / d) : 0;
    const at = b * Q4_0_BLOCK_BYTES;
    view.setUint16(at, f32ToF16(d), true);
    // (int8_t)(x + 8.5f) truncates toward zero, then MIN(15, ...).
    const nibble = (x: number): number => Math.min(15, Math.trunc(Math.fround(Math.fround(x * id) + 8.5)));
    for (let j = 0; j < half; j++) {
      const lo = nibble(values[b * BLOCK_SIZE + j]!);
      const hi = nibble(values[b * BLOCK_SIZE + half + j]!);
      out[at + 2 + j] = (lo & 0x0f) | ((hi & 0x0f) << 4);
    }
  }
  return out;
}

export function dequantizeQ8_0(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let b = 0; b < count / BLOCK_SIZE; b++) {
    const at = b * Q8_0_BLOCK_BYTES;
    const d = f16ToF32(view.getUint16(at, true));
    for (let j = 0; j < BLOCK_SIZE; j++) out[b * BLOCK_SIZE + j] = view.getInt8(at + 2 + j) * d;
  }
  return out;
}

export function dequantizeQ4_0(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const half = BLOCK_SIZE / 2;
  for (let b = 0; b < count / BLOCK_SIZE; b++) {
    const at = b * Q4_0_BLOCK_BYTES;
    const d = f16ToF32(view.getUint16(at, true));
    for (let j = 0; j < half; j++) {
      const byte = bytes[at + 2 + j]!;
      out[b * BLOCK_SIZE + j] = ((byte & 0x0f) - 8) * d;
      out[b * BLOCK_SIZE + half + j] = ((byte >>> 4) - 8) * d;
    }
  }
  return out;
}

export function decodeF16(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) out[i] = f16ToF32(view.getUint16(i * 2, true));
  return out;
}

export function decodeF32(bytes: Uint8Array, count: number): Float32Array {
  const out = new Float32Array(count);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i++) out[i] = view.getFloat32(i * 4, true);
  return out;
}
