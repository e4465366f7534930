// Runs tiny-chat's arithmetic in plain JS on the weights as written (and
// dequantized), to show the greedy output is the documented alphabet and the
// same for all three quantizations, without llama.cpp.
import { describe, expect, it } from 'vitest';
import { readGguf, readTensor, type GgufFile } from './gguf-reader.js';
import { writeGguf } from './gguf-writer.js';
import { BOS_ID, EOS_ID, charTokenId, TINY_CHAT_TEMPLATE, TINY_CHAT_VOCAB_SIZE, tinyChatContinuation, tinyChatModel } from './tiny-chat.js';

const N_EMBD = 128;
const files = {
  F16: readGguf(writeGguf(tinyChatModel('F16'))),
  Q8_0: readGguf(writeGguf(tinyChatModel('Q8_0'))),
  Q4_0: readGguf(writeGguf(tinyChatModel('Q4_0'))),
};

/** Logits after `token`: attention and FFN add nothing, so it is output · rmsnorm(embedding). */
function logitsAfter(file: GgufFile, token: number): Float32Array {
  const embd = readTensor(file, 'token_embd.weight');
  const output = readTensor(file, 'output.weight');
  const norm = readTensor(file, 'output_norm.weight');
  const x = embd.subarray(token * N_EMBD, (token + 1) * N_EMBD);
  const rms = Math.sqrt(x.reduce((s, v) => s + v * v, 0) / N_EMBD + 1e-5);
  const h = Array.from(x, (v, i) => (v / rms) * norm[i]!);
  const logits = new Float32Array(TINY_CHAT_VOCAB_SIZE);
  for (let j = 0; j < TINY_CHAT_VOCAB_SIZE; j++) {
    let s = 0;
    for (let i = 0; i < N_EMBD; i++) s += output[j * N_EMBD + i]! * h[i]!;
    logits[j] = s;
  }
  return logits;
}

function greedy(file: GgufFile, prompt: number[]): { text: string; margin: number } {
  const tokens = file.metadata.get('tokenizer.ggml.tokens') as string[];
  let last = prompt.at(-1)!;
  let text = '';
  let margin = Infinity;
  for (let step = 0; step < 100; step++) {
    const logits = logitsAfter(file, last);
    const sorted = Array.from(logits).sort((a, b) => b - a);
    margin = Math.min(margin, sorted[0]! - sorted[1]!);
    const next = logits.indexOf(sorted[0]!);
    if (next === EOS_ID) return { text, margin };
    text += tokens[next]!.replace('\u2581', ' ');
    last = next;
  }
  throw new Error('no end of sequence within 100 tokens');
}

const encode = (text: string): number[] => [BOS_ID, ...Array.from(text, charTokenId)];

describe('tiny-chat', () => {
  it('is a llama model whose attention and FFN outputs are zero (a bigram model)', () => {
    for (const file of Object.values(files)) {
      expect(file.metadata.get('general.architecture')).toBe('llama');
      expect(file.metadata.get('tokenizer.chat_template')).toBe(TINY_CHAT_TEMPLATE);
      for (const name of ['blk.0.attn_output.weight', 'blk.1.attn_output.weight', 'blk.0.ffn_down.weight', 'blk.1.ffn_down.weight']) {
        expect(readTensor(file, name).every((v) => v === 0)).toBe(true);
      }
    }
  });

  it('has one token per printable ASCII character', () => {
    const tokens = files.F16.metadata.get('tokenizer.ggml.tokens') as string[];
    expect(tokens.length).toBe(TINY_CHAT_VOCAB_SIZE);
    for (let c = 0x21; c <= 0x7e; c++) expect(tokens[charTokenId(String.fromCharCode(c))]).toBe(String.fromCharCode(c));
    expect(tokens[charTokenId(' ')]).toBe('\u2581');
  });

  it.each(['abc', 'Hello world', 'What comes after ABC', 'xyz', 'Z', 'Hi!', '42', ''])(
    'greedily continues %j the same way in F16, Q8_0 and Q4_0, with a wide margin',
    (prompt) => {
      const outputs = Object.values(files).map((file) => greedy(file, encode(prompt)));
      for (const out of outputs) {
        expect(out.text).toBe(tinyChatContinuation(prompt));
        expect(out.margin).toBeGreaterThan(40);
      }
    },
  );

  it('documents its behaviour in tinyChatContinuation', () => {
    expect(tinyChatContinuation('abc')).toBe('defghijklmnopqrstuvwxyz');
    expect(tinyChatContinuation('ABC')).toBe('DEFGHIJKLMNOPQRSTUVWXYZ');
    expect(tinyChatContinuation('xyz')).toBe('');
    expect(tinyChatContinuation('Hi!')).toBe('abcdefghijklmnopqrstuvwxyz');
    expect(tinyChatContinuation('')).toBe('abcdefghijklmnopqrstuvwxyz');
  });
});
