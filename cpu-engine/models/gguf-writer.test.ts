import { describe, expect, it } from 'vitest';
import { readGguf, readTensor } from './gguf-reader.js';
import { GGUF_ALIGNMENT, GGUF_MAGIC, meta, writeGguf, type GgufModel } from './gguf-writer.js';

const model: GgufModel = {
  metadata: [
    ['general.architecture', meta.string('llama')],
    ['test.u32', meta.u32(4_000_000_000)],
    ['test.i32', meta.i32(-7)],
    ['test.f32', meta.f32(0.5)],
    ['test.bool', meta.bool(true)],
    ['test.strings', meta.strings(['a', '▁b', ''])],
    ['test.i32s', meta.i32s([1, -2, 3])],
    ['test.f32s', meta.f32s([0.25, -1])],
  ],
  tensors: [
    { name: 'norm.weight', dims: [3], type: 'F32', values: Float32Array.of(1, 2, 3) },
    { name: 'half.weight', dims: [32, 2], type: 'F16', values: Float32Array.from({ length: 64 }, (_, i) => i / 4) },
    { name: 'q8.weight', dims: [64, 1], type: 'Q8_0', values: Float32Array.from({ length: 64 }, (_, i) => (i % 32) - 16) },
    { name: 'q4.weight', dims: [32, 1], type: 'Q4_0', values: Float32Array.from({ length: 32 }, (_, i) => (i === 3 ? 4 : 0)) },
  ],
};

describe('GGUF writer', () => {
  const bytes = writeGguf(model);
  const file = readGguf(bytes);

  it('writes a GGUF v3 header with the tensor and metadata counts', () => {
    const view = new DataView(bytes.buffer, bytes.byteOffset);
    expect(view.getUint32(0, true)).toBe(GGUF_MAGIC);
    expect(Buffer.from(bytes.subarray(0, 4)).toString('latin1')).toBe('GGUF');
    expect(file.version).toBe(3);
    expect(view.getBigUint64(8, true)).toBe(4n);
    expect(view.getBigUint64(16, true)).toBe(8n);
  });

  it('reads back every metadata value with its type', () => {
    expect(Object.fromEntries(file.metadata)).toEqual({
      'general.architecture': 'llama',
      'test.u32': 4_000_000_000,
      'test.i32': -7,
      'test.f32': 0.5,
      'test.bool': true,
      'test.strings': ['a', '▁b', ''],
      'test.i32s': [1, -2, 3],
      'test.f32s': [0.25, -1],
    });
  });

  it('writes a tensor table with 32-byte aligned offsets and the data where it says', () => {
    expect(file.tensors.map((t) => [t.name, t.dims, t.type])).toEqual([
      ['norm.weight', [3], 'F32'],
      ['half.weight', [32, 2], 'F16'],
      ['q8.weight', [64, 1], 'Q8_0'],
      ['q4.weight', [32, 1], 'Q4_0'],
    ]);
    expect(file.tensors.map((t) => t.offset)).toEqual([0, 32, 32 + 128, 32 + 128 + 96]);
    expect(file.dataStart % GGUF_ALIGNMENT).toBe(0);
    expect(bytes.length).toBe(file.dataStart + 32 + 128 + 96 + 32);
    expect(Array.from(readTensor(file, 'norm.weight'))).toEqual([1, 2, 3]);
    expect(Array.from(readTensor(file, 'half.weight'))).toEqual(Array.from(model.tensors[1]!.values));
    expect(readTensor(file, 'q4.weight')[3]).toBe(4);
    expect(readTensor(file, 'q8.weight')[0]).toBeCloseTo(-16, 1);
  });

  it('writes the same bytes every time', () => {
    expect(Buffer.from(writeGguf(model)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('refuses tensors whose values do not match their dims, and duplicate names', () => {
    expect(() => writeGguf({ metadata: [], tensors: [{ name: 'x', dims: [4], type: 'F32', values: new Float32Array(3) }] })).toThrow(/need 4 values/);
    const t = { name: 'x', dims: [1], type: 'F32' as const, values: new Float32Array(1) };
    expect(() => writeGguf({ metadata: [], tensors: [t, t] })).toThrow(/duplicate tensor name x/);
  });
});
