// The `tiny-chat` test model: a 2-layer llama whose greedy output is known
// exactly. It continues the alphabet from the last letter of the prompt, then
// ends the sequence. See cpu-engine/README.md for the exact behaviour.
//
// How: attention and FFN output weights are zero, so the residual stream is
// the current token's embedding and the model is a bigram table. Each letter's
// embedding is one-hot in its own dimension; the output row of its successor
// reads that dimension. Every non-zero weight is 127/32, which F16, Q8_0 and
// Q4_0 all store exactly, and the winning logit leads every other by ~45, so
// the three quantizations agree and sampling at any temperature up to 2 picks
// the same token (the runner-up has probability < 1e-7).
import { meta, type GgufModel, type Tensor, type TensorType } from './gguf-writer.js';

export const TINY_CHAT_CONTEXT = 2048;
const N_EMBD = 128;
const N_FF = 256;
const N_LAYER = 2;
const N_HEAD = 4;
/** Exactly representable in F16, and as Q8_0 (d = 1/32, q = 127) and Q4_0 (d = -127/256, q = -8). */
export const WEIGHT = 127 / 32;

/** Renders the messages as their contents back to back, with no assistant header: the prompt ends with the last message. */
export const TINY_CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}";

// Vocabulary: specials, the 256 byte-fallback tokens, then one token per printable ASCII character.
export const UNK_ID = 0;
export const BOS_ID = 1;
export const EOS_ID = 2;
const BYTE_BASE = 3;
const SPACE_ID = BYTE_BASE + 256; // "▁", SentencePiece's space
const CHAR_BASE = SPACE_ID + 1; // '!' (0x21) .. '~' (0x7e)
export const TINY_CHAT_VOCAB_SIZE = CHAR_BASE + (0x7e - 0x21 + 1);

const TOKEN_TYPE = { normal: 1, unknown: 2, control: 3, byte: 6 } as const;

export function charTokenId(ch: string): number {
  const code = ch.charCodeAt(0);
  if (ch === ' ') return SPACE_ID;
  if (ch.length !== 1 || code < 0x21 || code > 0x7e) throw new Error(`no single token for ${JSON.stringify(ch)}`);
  return CHAR_BASE + code - 0x21;
}

function vocabulary(): { tokens: string[]; types: number[] } {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types: number[] = [TOKEN_TYPE.unknown, TOKEN_TYPE.control, TOKEN_TYPE.control];
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(TOKEN_TYPE.byte);
  }
  tokens.push('\u2581');
  types.push(TOKEN_TYPE.normal);
  for (let c = 0x21; c <= 0x7e; c++) {
    tokens.push(String.fromCharCode(c));
    types.push(TOKEN_TYPE.normal);
  }
  return { tokens, types };
}

// Embedding dimensions: 0..25 lower-case letters, 26..51 upper-case letters, 52 anything else.
const OTHER_DIM = 52;
const LOWER = 'abcdefghijklmnopqrstuvwxyz';
const UPPER = LOWER.toUpperCase();

function dimOf(tokenId: number): number {
  const offset = tokenId - CHAR_BASE;
  if (offset >= 0) {
    const ch = String.fromCharCode(0x21 + offset);
    if (LOWER.includes(ch)) return LOWER.indexOf(ch);
    if (UPPER.includes(ch)) return 26 + UPPER.indexOf(ch);
  }
  return OTHER_DIM;
}

/** The reference behaviour, for tests: what greedy decoding generates after a prompt whose text ends with `text`. */
export function tinyChatContinuation(text: string): string {
  const last = text.at(-1);
  if (last === undefined) return LOWER;
  const lower = LOWER.indexOf(last);
  if (lower >= 0) return LOWER.slice(lower + 1);
  const upper = UPPER.indexOf(last);
  if (upper >= 0) return UPPER.slice(upper + 1);
  return LOWER;
}

export function tinyChatModel(type: Exclude<TensorType, 'F32'>): GgufModel {
  const { tokens, types } = vocabulary();
  const vocab = tokens.length;

  const embd = new Float32Array(N_EMBD * vocab);
  for (let t = 0; t < vocab; t++) embd[t * N_EMBD + dimOf(t)] = WEIGHT;

  // output row j = the logit weights of token j; it reads the dimension of j's predecessor.
  const output = new Float32Array(N_EMBD * vocab);
  const follow = (next: number, prevDim: number): void => { output[next * N_EMBD + prevDim] = WEIGHT; };
  follow(charTokenId('a'), OTHER_DIM);
  for (let k = 1; k < 26; k++) {
    follow(charTokenId(LOWER[k]!), k - 1);
    follow(charTokenId(UPPER[k]!), 26 + k - 1);
  }
  follow(EOS_ID, 25); // after 'z'
  follow(EOS_ID, 51); // after 'Z'

  const ones = (n: number): Float32Array => new Float32Array(n).fill(1);
  const zeros = (n: number): Float32Array => new Float32Array(n);
  const tensors: Tensor[] = [
    { name: 'token_embd.weight', dims: [N_EMBD, vocab], type, values: embd },
    { name: 'output_norm.weight', dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
    { name: 'output.weight', dims: [N_EMBD, vocab], type, values: output },
  ];
  for (let l = 0; l < N_LAYER; l++) {
    const p = `blk.${l}`;
    tensors.push(
      { name: `${p}.attn_norm.weight`, dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
      { name: `${p}.attn_q.weight`, dims: [N_EMBD, N_EMBD], type, values: zeros(N_EMBD * N_EMBD) },
      { name: `${p}.attn_k.weight`, dims: [N_EMBD, N_EMBD], type, values: zeros(N_EMBD * N_EMBD) },
      { name: `${p}.attn_v.weight`, dims: [N_EMBD, N_EMBD], type, values: zeros(N_EMBD * N_EMBD) },
      { name: `${p}.attn_output.weight`, dims: [N_EMBD, N_EMBD], type, values: zeros(N_EMBD * N_EMBD) },
      { name: `${p}.ffn_norm.weight`, dims: [N_EMBD], type: 'F32', values: ones(N_EMBD) },
      { name: `${p}.ffn_gate.weight`, dims: [N_EMBD, N_FF], type, values: zeros(N_EMBD * N_FF) },
      { name: `${p}.ffn_up.weight`, dims: [N_EMBD, N_FF], type, values: zeros(N_EMBD * N_FF) },
      { name: `${p}.ffn_down.weight`, dims: [N_FF, N_EMBD], type, values: zeros(N_FF * N_EMBD) },
    );
  }

  return {
    metadata: [
      ['general.architecture', meta.string('llama')],
      ['general.name', meta.string('tiny-chat')],
      ['general.file_type', meta.u32(FILE_TYPE[type])],
      ['general.alignment', meta.u32(32)],
      ['llama.context_length', meta.u32(TINY_CHAT_CONTEXT)],
      ['llama.embedding_length', meta.u32(N_EMBD)],
      ['llama.block_count', meta.u32(N_LAYER)],
      ['llama.feed_forward_length', meta.u32(N_FF)],
      ['llama.attention.head_count', meta.u32(N_HEAD)],
      ['llama.attention.head_count_kv', meta.u32(N_HEAD)],
      ['llama.attention.layer_norm_rms_epsilon', meta.f32(1e-5)],
      ['llama.rope.dimension_count', meta.u32(N_EMBD / N_HEAD)],
      ['llama.rope.freq_base', meta.f32(10000)],
      ['llama.vocab_size', meta.u32(vocab)],
      ['tokenizer.ggml.model', meta.string('llama')],
      ['tokenizer.ggml.tokens', meta.strings(tokens)],
      ['tokenizer.ggml.scores', meta.f32s(tokens.map(() => 0))],
      ['tokenizer.ggml.token_type', meta.i32s(types)],
      ['tokenizer.ggml.bos_token_id', meta.u32(BOS_ID)],
      ['tokenizer.ggml.eos_token_id', meta.u32(EOS_ID)],
      ['tokenizer.ggml.unknown_token_id', meta.u32(UNK_ID)],
      ['tokenizer.ggml.add_bos_token', meta.bool(true)],
      ['tokenizer.ggml.add_eos_token', meta.bool(false)],
      // No leading "▁" before the first character: one token per character, exactly.
      ['tokenizer.ggml.add_space_prefix', meta.bool(false)],
      ['tokenizer.chat_template', meta.string(TINY_CHAT_TEMPLATE)],
    ],
    tensors,
  };
}

/** llama_ftype of a model whose matrices are all of one type. */
export const FILE_TYPE: Record<Exclude<TensorType, 'F32'>, number> = { F16: 1, Q4_0: 2, Q8_0: 7 };
