import { describe, expect, it } from 'vitest';
import {
  BLOCK_SIZE, dequantizeQ4_0, dequantizeQ8_0, decodeF16, encodeF16, f16ToF32, f32ToF16, quantizeQ4_0, quantizeQ8_0,
} from './quantize.js';
import { WEIGHT } from './tiny-chat.js';

const block = (f: (i: number) => number): Float32Array => Float32Array.from({ length: BLOCK_SIZE }, (_, i) => f(i));

describe('half floats', () => {
  it('encodes known values bit-exactly', () => {
    expect(f32ToF16(0)).toBe(0x0000);
    expect(f32ToF16(-0)).toBe(0x8000);
    expect(f32ToF16(1)).toBe(0x3c00);
    expect(f32ToF16(-2)).toBe(0xc000);
    expect(f32ToF16(0.5)).toBe(0x3800);
    expect(f32ToF16(65504)).toBe(0x7bff); // largest finite half
    expect(f32ToF16(1e6)).toBe(0x7c00); // overflow: infinity
    expect(f32ToF16(2 ** -24)).toBe(0x0001); // smallest subnormal
    expect(f32ToF16(2 ** -26)).toBe(0x0000); // underflow
    expect(f32ToF16(NaN) & 0x7c00).toBe(0x7c00);
  });

  it('rounds to nearest, ties to even', () => {
    expect(f32ToF16(1 + 2 ** -11)).toBe(0x3c00); // tie: down to the even mantissa
    expect(f32ToF16(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie: up to the even mantissa
    expect(f32ToF16(1 + 2 ** -11 + 2 ** -20)).toBe(0x3c01); // above the tie
  });

  it('decodes what it encodes for representable values', () => {
    for (const v of [0, 1, -1, 0.25, 3.96875, 1024, -65504, 2 ** -24, 6.103515625e-5]) expect(f16ToF32(f32ToF16(v))).toBe(v);
    expect(Array.from(decodeF16(encodeF16(Float32Array.of(1, -2, 0.5)), 3))).toEqual([1, -2, 0.5]);
  });
});

describe('Q8_0', () => {
  it('writes a block as ggml does: half-float scale amax/127, then round(x / scale)', () => {
    const bytes = quantizeQ8_0(block((i) => i - 16)); // amax 16
    expect(bytes.length).toBe(34);
    const view = new DataView(bytes.buffer);
    expect(view.getUint16(0, true)).toBe(f32ToF16(16 / 127));
    expect(view.getInt8(2)).toBe(-127); // -16 / (16/127)
    expect(view.getInt8(2 + 16)).toBe(0);
    expect(view.getInt8(2 + 17)).toBe(8); // 1 / (16/127) = 7.94 -> 8
    expect(view.getInt8(2 + 31)).toBe(119); // 15 * 127 / 16 = 119.06
  });

  it('rounds halves away from zero like C roundf', () => {
    // amax 127 -> scale 1, so x * 1/scale is x itself.
    const bytes = quantizeQ8_0(block((i) => (i === 0 ? 127 : i === 1 ? 2.5 : i === 2 ? -2.5 : 0)));
    const view = new DataView(bytes.buffer);
    expect([view.getInt8(3), view.getInt8(4)]).toEqual([3, -3]);
  });

  it('stores an all-zero block as zeros', () => {
    expect(Array.from(quantizeQ8_0(new Float32Array(BLOCK_SIZE)))).toEqual(new Array(34).fill(0));
  });

  it('refuses a length that is not whole blocks', () => {
    expect(() => quantizeQ8_0(new Float32Array(33))).toThrow(/multiple of 32/);
  });
});

describe('Q4_0', () => {
  it('writes a block as ggml does: scale max/-8, nibbles x/scale + 8 packed low half / high half', () => {
    const values = block((i) => i - 16); // -16 .. 15; the largest magnitude is -16
    const bytes = quantizeQ4_0(values);
    expect(bytes.length).toBe(18);
    const view = new DataView(bytes.buffer);
    expect(f16ToF32(view.getUint16(0, true))).toBe(2); // -16 / -8
    // x = -16 -> -16/2 + 8.5 -> 0.5 -> 0; x = 0 (i = 16) -> 8.5 -> 8: byte 0 is 0 | 8 << 4.
    expect(bytes[2]).toBe(0x80);
    // x = -1 (i = 15) -> 8; x = 15 (i = 31) -> 16 -> clamped to 15.
    expect(bytes[2 + 15]).toBe(0x08 | (15 << 4));
    const back = dequantizeQ4_0(bytes, BLOCK_SIZE);
    expect(back[0]).toBe(-16);
    expect(back[16]).toBe(0);
    expect(back[31]).toBe(14); // the top of the range loses one step
  });
});

describe('the tiny-chat weight', () => {
  it('is stored exactly by F16, Q8_0 and Q4_0, in any position of a block', () => {
    for (const at of [0, 7, 31]) {
      const values = block((i) => (i === at ? WEIGHT : 0));
      expect(Array.from(decodeF16(encodeF16(values), BLOCK_SIZE))).toEqual(Array.from(values));
      expect(Array.from(dequantizeQ8_0(quantizeQ8_0(values), BLOCK_SIZE))).toEqual(Array.from(values));
      // (+ 0 turns the -0 of a negative scale times zero into 0.)
      expect(Array.from(dequantizeQ4_0(quantizeQ4_0(values), BLOCK_SIZE), (x) => x + 0)).toEqual(Array.from(values));
    }
  });
});
