// Writes GGUF v3 files (the llama.cpp model format): header, typed metadata,
// tensor table and 32-byte aligned tensor data, with 2-D weights stored as
// F32, F16, Q8_0 or Q4_0. Deterministic: the same model gives the same bytes.
import { encodeF16, encodeF32, quantizeQ4_0, quantizeQ8_0 } from './quantize.js';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as a little-endian u32
export const GGUF_VERSION = 3;
export const GGUF_ALIGNMENT = 32;

/** ggml_type ids of the tensor encodings this writer produces. */
export const GGML_TYPE = { F32: 0, F16: 1, Q4_0: 2, Q8_0: 8 } as const;
export type TensorType = keyof typeof GGML_TYPE;

/** gguf_type ids of metadata values. */
export const GGUF_VALUE_TYPE = {
  u8: 0, i8: 1, u16: 2, i16: 3, u32: 4, i32: 5, f32: 6, bool: 7, string: 8, array: 9, u64: 10, i64: 11, f64: 12,
} as const;

export type ScalarType = 'u32' | 'i32' | 'f32' | 'bool' | 'string';
export type MetadataValue =
  | { type: 'u32' | 'i32' | 'f32'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | { type: 'array'; itemType: 'i32' | 'f32'; value: number[] }
  | { type: 'array'; itemType: 'string'; value: string[] };

export const meta = {
  u32: (value: number): MetadataValue => ({ type: 'u32', value }),
  i32: (value: number): MetadataValue => ({ type: 'i32', value }),
  f32: (value: number): MetadataValue => ({ type: 'f32', value }),
  bool: (value: boolean): MetadataValue => ({ type: 'bool', value }),
  string: (value: string): MetadataValue => ({ type: 'string', value }),
  i32s: (value: number[]): MetadataValue => ({ type: 'array', itemType: 'i32', value }),
  f32s: (value: number[]): MetadataValue => ({ type: 'array', itemType: 'f32', value }),
  strings: (value: string[]): MetadataValue => ({ type: 'array', itemType: 'string', value }),
};

export interface Tensor {
  name: string;
  /** ggml order: dims[0] is the row length (ne0), e.g. [n_embd, n_vocab] for token_embd. */
  dims: number[];
  type: TensorType;
  /** Row-major values, dims[0] per row; encoded (and quantized) by the writer. */
  values: Float32Array;
}

export interface GgufModel {
  /** Written in this order; llama.cpp reads keys by name. */
  metadata: Array<[string, MetadataValue]>;
  tensors: Tensor[];
}

export function encodeTensor(tensor: Tensor): Uint8Array {
  const count = tensor.dims.reduce((a, b) => a * b, 1);
  if (count !== tensor.values.length) {
    throw new Error(`tensor ${tensor.name}: dims ${tensor.dims.join('x')} need ${count} values, got ${tensor.values.length}`);
  }
  switch (tensor.type) {
    case 'F32': return encodeF32(tensor.values);
    case 'F16': return encodeF16(tensor.values);
    case 'Q8_0': return quantizeQ8_0(tensor.values);
    case 'Q4_0': return quantizeQ4_0(tensor.values);
  }
}

/** Growable little-endian byte sink. */
class ByteSink {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;

  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let size = this.buf.length * 2;
    while (size < this.length + n) size *= 2;
    const next = new Uint8Array(size);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void { this.reserve(1); this.view.setUint8(this.length, v); this.length += 1; }
  u32(v: number): void { this.reserve(4); this.view.setUint32(this.length, v, true); this.length += 4; }
  i32(v: number): void { this.reserve(4); this.view.setInt32(this.length, v, true); this.length += 4; }
  f32(v: number): void { this.reserve(4); this.view.setFloat32(this.length, v, true); this.length += 4; }
  u64(v: number): void { this.reserve(8); this.view.setBigUint64(this.length, BigInt(v), true); this.length += 8; }
  bytes(b: Uint8Array): void { this.reserve(b.length); this.buf.set(b, this.length); this.length += b.length; }
  string(s: string): void { const b = Buffer.from(s, 'utf8'); this.u64(b.length); this.bytes(b); }
  pad(alignment: number): void { while (this.length % alignment !== 0) this.u8(0); }
  result(): Uint8Array { return this.buf.slice(0, this.length); }
}

function writeValue(sink: ByteSink, value: MetadataValue): void {
  if (value.type === 'array') {
    sink.u32(GGUF_VALUE_TYPE.array);
    sink.u32(GGUF_VALUE_TYPE[value.itemType]);
    sink.u64(value.value.length);
    for (const item of value.value) {
      if (value.itemType === 'string') sink.string(item as string);
      else if (value.itemType === 'i32') sink.i32(item as number);
      else sink.f32(item as number);
    }
    return;
  }
  sink.u32(GGUF_VALUE_TYPE[value.type]);
  switch (value.type) {
    case 'u32': sink.u32(value.value); break;
    case 'i32': sink.i32(value.value); break;
    case 'f32': sink.f32(value.value); break;
    case 'bool': sink.u8(value.value ? 1 : 0); break;
    case 'string': sink.string(value.value); break;
  }
}

/** The whole file: header, metadata, tensor infos, padding, aligned tensor data. */
export function writeGguf(model: GgufModel): Uint8Array {
  const names = new Set<string>();
  for (const t of model.tensors) {
    if (names.has(t.name)) throw new Error(`duplicate tensor name ${t.name}`);
    names.add(t.name);
  }
  const encoded = model.tensors.map(encodeTensor);
  const sink = new ByteSink();
  sink.u32(GGUF_MAGIC);
  sink.u32(GGUF_VERSION);
  sink.u64(model.tensors.length);
  sink.u64(model.metadata.length);
  for (const [key, value] of model.metadata) {
    sink.string(key);
    writeValue(sink, value);
  }
  let offset = 0;
  model.tensors.forEach((tensor, i) => {
    sink.string(tensor.name);
    sink.u32(tensor.dims.length);
    for (const d of tensor.dims) sink.u64(d);
    sink.u32(GGML_TYPE[tensor.type]);
    sink.u64(offset);
    offset += encoded[i]!.length;
    offset = Math.ceil(offset / GGUF_ALIGNMENT) * GGUF_ALIGNMENT;
  });
  sink.pad(GGUF_ALIGNMENT);
  for (const bytes of encoded) {
    sink.bytes(bytes);
    sink.pad(GGUF_ALIGNMENT);
  }
  return sink.result();
}
