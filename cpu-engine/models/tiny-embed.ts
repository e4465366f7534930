// The `tiny-embed` test model: a 2-layer BERT (dimension 128, context 512, mean
// pooling) with seeded pseudo-random weights. Token embeddings dominate and the
// layers only perturb them, so texts with different characters get clearly
// different vectors, while the same text always gets the same one.
import { meta, type GgufModel, type Tensor, type TensorType } from './gguf-writer.js';
import { FILE_TYPE } from './tiny-chat.js';

export const TINY_EMBED_CONTEXT = 512;
export const TINY_EMBED_DIMENSION = 128;
const N_EMBD = TINY_EMBED_DIMENSION;
const N_FF = 256;
const N_LAYER = 2;
const N_HEAD = 4;

export const PAD_ID = 0;
export const UNK_ID = 1;
export const CLS_ID = 2;
export const SEP_ID = 3;
export const MASK_ID = 4;
const FIRST_CHAR_ID = 5;

const TOKEN_TYPE = { normal: 1, control: 3 } as const;

/**
 * WordPiece vocabulary as llama.cpp stores it: a word-initial piece carries the
 * "▁" prefix, a continuation piece has none. Every printable ASCII character is
 * both, so each non-space character of the input is exactly one token.
 */
function vocabulary(): { tokens: string[]; types: number[] } {
  const tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const types: number[] = tokens.map(() => TOKEN_TYPE.control);
  for (let c = 0x21; c <= 0x7e; c++) {
    const ch = String.fromCharCode(c);
    tokens.push(`\u2581${ch}`, ch);
    types.push(TOKEN_TYPE.normal, TOKEN_TYPE.normal);
  }
  return { tokens, types };
}

/** mulberry32: a tiny seeded PRNG, so the weights (and the file bytes) never change. */
function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Roughly normal values (sum of uniforms), scaled. */
function randomValues(next: () => number, count: number, scale: number): Float32Array {
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) out[i] = (next() + next() + next() + next() - 2) * Math.sqrt(3) * scale;
  return out;
}

export function tinyEmbedModel(type: Exclude<TensorType, 'F32'>): GgufModel {
  const { tokens, types } = vocabulary();
  const vocab = tokens.length;
  const next = prng(0x5eed);

  const embd = randomValues(next, N_EMBD * vocab, 1);
  // The word-initial and continuation pieces of a character share an embedding,
  // so "ab" and "a b" differ only slightly (positions), as words should not matter much.
  for (let t = FIRST_CHAR_ID; t < vocab; t += 2) embd.copyWithin((t + 1) * N_EMBD, t * N_EMBD, (t + 1) * N_EMBD);
  // [SEP] = -[CLS]: every input carries both, and with near-identity layers their
  // contributions to the mean cancel, so the vector is about the text alone.
  for (let i = 0; i < N_EMBD; i++) embd[SEP_ID * N_EMBD + i] = -embd[CLS_ID * N_EMBD + i]!;

  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const zeros = (n: number): Float32Array => new Float32Array(n);
  const small = (n: number): Float32Array => randomValues(next, n, 0.05);

  const tensors: Tensor[] = [
    { name: 'token_embd.weight', dims: [N_EMBD, vocab], type, values: embd },
    { name: 'token_types.weight', dims: [N_EMBD, 2], type: 'F32', values: zeros(N_EMBD * 2) },
    { name: 'position_embd.weight', dims: [N_EMBD, TINY_EMBED_CONTEXT], type, values: small(N_EMBD * TINY_EMBED_CONTEXT) },
    { name: 'token_embd_norm.weight', dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
    { name: 'token_embd_norm.bias', dims: [N_EMBD], type: 'F32', values: zeros(N_EMBD) },
  ];
  for (let l = 0; l < N_LAYER; l++) {
    const p = `blk.${l}`;
    for (const m of ['attn_q', 'attn_k', 'attn_v', 'attn_output']) {
      tensors.push(
        { name: `${p}.${m}.weight`, dims: [N_EMBD, N_EMBD], type, values: small(N_EMBD * N_EMBD) },
        { name: `${p}.${m}.bias`, dims: [N_EMBD], type: 'F32', values: zeros(N_EMBD) },
      );
    }
    tensors.push(
      { name: `${p}.attn_output_norm.weight`, dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
      { name: `${p}.attn_output_norm.bias`, dims: [N_EMBD], type: 'F32', values: zeros(N_EMBD) },
      { name: `${p}.ffn_up.weight`, dims: [N_EMBD, N_FF], type, values: small(N_EMBD * N_FF) },
      { name: `${p}.ffn_up.bias`, dims: [N_FF], type: 'F32', values: zeros(N_FF) },
      { name: `${p}.ffn_down.weight`, dims: [N_FF, N_EMBD], type, values: small(N_FF * N_EMBD) },
      { name: `${p}.ffn_down.bias`, dims: [N_EMBD], type: 'F32', values: zeros(N_EMBD) },
      { name: `${p}.layer_output_norm.weight`, dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
      { name: `${p}.layer_output_norm.bias`, dims: [N_EMBD], type: 'F32', values: zeros(N_EMBD) },
    );
  }

  return {
    metadata: [
      ['general.architecture', meta.string('bert')],
      ['general.name', meta.string('tiny-embed')],
      ['general.file_type', meta.u32(FILE_TYPE[type])],
      ['general.alignment', meta.u32(32)],
      ['bert.context_length', meta.u32(TINY_EMBED_CONTEXT)],
      ['bert.embedding_length', meta.u32(N_EMBD)],
      ['bert.block_count', meta.u32(N_LAYER)],
      ['bert.feed_forward_length', meta.u32(N_FF)],
      ['bert.attention.head_count', meta.u32(N_HEAD)],
      ['bert.attention.layer_norm_epsilon', meta.f32(1e-12)],
      ['bert.attention.causal', meta.bool(false)],
      ['bert.pooling_type', meta.u32(1)], // mean
      ['tokenizer.ggml.model', meta.string('bert')],
      ['tokenizer.ggml.tokens', meta.strings(tokens)],
      ['tokenizer.ggml.token_type', meta.i32s(types)],
      ['tokenizer.ggml.token_type_count', meta.u32(2)],
      // [CLS] is the "BOS" of a WordPiece vocabulary; BERT has no end-of-sequence token.
      ['tokenizer.ggml.bos_token_id', meta.u32(CLS_ID)],
      ['tokenizer.ggml.seperator_token_id', meta.u32(SEP_ID)],
      ['tokenizer.ggml.unknown_token_id', meta.u32(UNK_ID)],
      ['tokenizer.ggml.padding_token_id', meta.u32(PAD_ID)],
      ['tokenizer.ggml.mask_token_id', meta.u32(MASK_ID)],
    ],
    tensors,
  };
}
