// Reads back what gguf-writer.ts writes (GGUF v3: metadata and tensor table,
// tensor data decoded to floats), so tests can check files byte-exactly and run
// the tiny models' arithmetic without llama.cpp.
import { GGML_TYPE, GGUF_ALIGNMENT, GGUF_MAGIC, GGUF_VALUE_TYPE, type TensorType } from './gguf-writer.js';
import { Q4_0_BLOCK_BYTES, Q8_0_BLOCK_BYTES, BLOCK_SIZE, decodeF16, decodeF32, dequantizeQ4_0, dequantizeQ8_0 } from './quantize.js';

export type ReadValue = number | bigint | boolean | string | ReadValue[];

export interface TensorInfo {
  name: string;
  dims: number[];
  type: TensorType;
  /** Offset from the start of the data section. */
  offset: number;
}

export interface GgufFile {
  version: number;
  metadata: Map<string, ReadValue>;
  tensors: TensorInfo[];
  dataStart: number;
  bytes: Uint8Array;
}

const TYPE_BY_ID = new Map<number, TensorType>(Object.entries(GGML_TYPE).map(([k, v]) => [v, k as TensorType]));

export function readGguf(bytes: Uint8Array): GgufFile {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  const u8 = (): number => view.getUint8(at++);
  const u32 = (): number => { const v = view.getUint32(at, true); at += 4; return v; };
  const u64 = (): number => { const v = view.getBigUint64(at, true); at += 8; return Number(v); };
  const str = (): string => { const n = u64(); const s = Buffer.from(bytes.subarray(at, at + n)).toString('utf8'); at += n; return s; };
  const value = (type: number): ReadValue => {
    switch (type) {
      case GGUF_VALUE_TYPE.u8: return u8();
      case GGUF_VALUE_TYPE.i8: { const v = view.getInt8(at); at += 1; return v; }
      case GGUF_VALUE_TYPE.u16: { const v = view.getUint16(at, true); at += 2; return v; }
      case GGUF_VALUE_TYPE.i16: { const v = view.getInt16(at, true); at += 2; return v; }
      case GGUF_VALUE_TYPE.u32: return u32();
      case GGUF_VALUE_TYPE.i32: { const v = view.getInt32(at, true); at += 4; return v; }
      case GGUF_VALUE_TYPE.f32: { const v = view.getFloat32(at, true); at += 4; return v; }
      case GGUF_VALUE_TYPE.bool: return u8() !== 0;
      case GGUF_VALUE_TYPE.string: return str();
      case GGUF_VALUE_TYPE.u64: { const v = view.getBigUint64(at, true); at += 8; return v; }
      case GGUF_VALUE_TYPE.i64: { const v = view.getBigInt64(at, true); at += 8; return v; }
      case GGUF_VALUE_TYPE.f64: { const v = view.getFloat64(at, true); at += 8; return v; }
      case GGUF_VALUE_TYPE.array: {
        const itemType = u32();
        const n = u64();
        const items: ReadValue[] = [];
        for (let i = 0; i < n; i++) items.push(value(itemType));
        return items;
      }
      default: throw new Error(`unknown GGUF value type ${type} at byte ${at}`);
    }
  };

  if (u32() !== GGUF_MAGIC) throw new Error('not a GGUF file (bad magic)');
  const version = u32();
  const tensorCount = u64();
  const kvCount = u64();
  const metadata = new Map<string, ReadValue>();
  for (let i = 0; i < kvCount; i++) {
    const key = str();
    metadata.set(key, value(u32()));
  }
  const tensors: TensorInfo[] = [];
  for (let i = 0; i < tensorCount; i++) {
    const name = str();
    const nDims = u32();
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(u64());
    const typeId = u32();
    const type = TYPE_BY_ID.get(typeId);
    if (!type) throw new Error(`tensor ${name}: unsupported ggml type ${typeId}`);
    tensors.push({ name, dims, type, offset: u64() });
  }
  const alignment = Number(metadata.get('general.alignment') ?? GGUF_ALIGNMENT);
  const dataStart = Math.ceil(at / alignment) * alignment;
  return { version, metadata, tensors, dataStart, bytes };
}

/** Size in bytes of a tensor's data. */
export function tensorByteSize(type: TensorType, count: number): number {
  switch (type) {
    case 'F32': return count * 4;
    case 'F16': return count * 2;
    case 'Q8_0': return (count / BLOCK_SIZE) * Q8_0_BLOCK_BYTES;
    case 'Q4_0': return (count / BLOCK_SIZE) * Q4_0_BLOCK_BYTES;
  }
}

/** A tensor's values as floats (dequantized for Q8_0 / Q4_0). */
export function readTensor(file: GgufFile, name: string): Float32Array {
  const info = file.tensors.find((t) => t.name === name);
  if (!info) throw new Error(`no tensor ${name}`);
  const count = info.dims.reduce((a, b) => a * b, 1);
  const start = file.dataStart + info.offset;
  const data = file.bytes.subarray(start, start + tensorByteSize(info.type, count));
  switch (info.type) {
    case 'F32': return decodeF32(data, count);
    case 'F16': return decodeF16(data, count);
    case 'Q8_0': return dequantizeQ8_0(data, count);
    case 'Q4_0': return dequantizeQ4_0(data, count);
  }
}
