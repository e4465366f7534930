import { describe, expect, it } from 'vitest';
import { readGguf, readTensor } from './gguf-reader.js';
import { writeGguf } from './gguf-writer.js';
import { CLS_ID, SEP_ID, TINY_EMBED_CONTEXT, TINY_EMBED_DIMENSION, tinyEmbedModel } from './tiny-embed.js';
import { testModelFiles } from './write-test-models.js';

describe('tiny-embed', () => {
  const file = readGguf(writeGguf(tinyEmbedModel('Q8_0')));

  it('is a BERT embedding model of dimension 128 and context 512 with a WordPiece vocabulary', () => {
    expect(file.metadata.get('general.architecture')).toBe('bert');
    expect(file.metadata.get('bert.embedding_length')).toBe(TINY_EMBED_DIMENSION);
    expect(file.metadata.get('bert.context_length')).toBe(TINY_EMBED_CONTEXT);
    expect(file.metadata.get('tokenizer.ggml.model')).toBe('bert');
    expect(file.metadata.has('tokenizer.ggml.eos_token_id')).toBe(false);
    const tokens = file.metadata.get('tokenizer.ggml.tokens') as string[];
    expect(tokens).toContain('\u2581a');
    expect(tokens).toContain('a');
    expect(readTensor(file, 'position_embd.weight').length).toBe(TINY_EMBED_DIMENSION * TINY_EMBED_CONTEXT);
  });

  it('gives [SEP] the negated [CLS] embedding, so the two cancel in mean pooling', () => {
    const embd = readTensor(readGguf(writeGguf(tinyEmbedModel('F16'))), 'token_embd.weight');
    const row = (t: number) => Array.from(embd.subarray(t * TINY_EMBED_DIMENSION, (t + 1) * TINY_EMBED_DIMENSION));
    expect(row(SEP_ID)).toEqual(row(CLS_ID).map((v) => -v + 0));
  });
});

describe('write-test-models', () => {
  it('names six files, a chat and an embedding model in each quantization, with the same bytes every run', () => {
    const files = testModelFiles();
    expect(files.map((f) => f.file).sort()).toEqual([
      'tiny-chat-f16.gguf', 'tiny-chat-q4_0.gguf', 'tiny-chat-q8_0.gguf',
      'tiny-embed-f16.gguf', 'tiny-embed-q4_0.gguf', 'tiny-embed-q8_0.gguf',
    ]);
    for (const f of files) expect(Buffer.from(writeGguf(f.model())).equals(Buffer.from(writeGguf(f.model())))).toBe(true);
  });
});
