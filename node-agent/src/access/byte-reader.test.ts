import { describe, expect, it } from 'vitest';
import { ByteReader } from './byte-reader.js';

async function* chunks(...parts: string[]): AsyncGenerator<Buffer> {
  for (const p of parts) yield Buffer.from(p);
}

describe('reading exact amounts from a chunked stream', () => {
  it('joins and splits chunks to the amounts asked for', async () => {
    const r = new ByteReader(chunks('ab', 'cdef', 'g', '', 'hij'));
    expect((await r.read(3)).toString()).toBe('abc');
    expect((await r.read(1)).toString()).toBe('d');
    expect((await r.read(5)).toString()).toBe('efghi');
    expect(r.position).toBe(9);
    expect((await r.read(5)).toString()).toBe('j');
    expect((await r.read(5)).length).toBe(0);
  });

  it('skips ahead, and says when the stream ended first', async () => {
    const r = new ByteReader(chunks('abcdef', 'ghij'));
    expect(await r.skip(7)).toBe(true);
    expect((await r.read(2)).toString()).toBe('hi');
    expect(await r.skip(5)).toBe(false);
  });

  it('pulls nothing before it is asked, and stops the source when closed', async () => {
    let pulled = 0;
    let stopped = false;
    const source = (async function* () {
      try {
        for (;;) {
          pulled++;
          yield Buffer.from('x');
        }
      } finally {
        stopped = true;
      }
    })();
    const r = new ByteReader(source);
    expect(pulled).toBe(0);
    await r.read(2);
    expect(pulled).toBe(2);
    await r.close();
    expect(stopped).toBe(true);
  });
});
