import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { StreamWriter } from './stream-writer.js';

/** A real object-mode Writable whose consumer we release by hand. */
function slowStream(highWaterMark: number) {
  const written: number[] = [];
  const pending: Array<() => void> = [];
  const stream = new Writable({
    objectMode: true,
    highWaterMark,
    write(chunk: number, _enc, done) {
      written.push(chunk);
      pending.push(done);
    },
  });
  const release = async () => {
    while (pending.length > 0) pending.shift()!();
    await new Promise((r) => setImmediate(r));
  };
  return { stream, written, release };
}

describe('StreamWriter', () => {
  it('stops writing when write() says false and resumes on drain, in order', async () => {
    const { stream, written, release } = slowStream(2);
    const writer = new StreamWriter<number>(stream, () => {
      throw new Error('no overflow expected');
    });
    for (let i = 0; i < 6; i++) expect(writer.send(i)).toBe(true);
    // The stream took messages until its buffer was full; the rest wait in our queue.
    expect(writer.queued).toBeGreaterThan(0);
    for (let i = 0; i < 10 && writer.queued > 0; i++) await release();
    await release();
    expect(written).toEqual([0, 1, 2, 3, 4, 5]);
    expect(writer.queued).toBe(0);
  });

  it('reports overflow past the limit and never writes after close', async () => {
    const { stream, written, release } = slowStream(1);
    let overflows = 0;
    const writer = new StreamWriter<number>(stream, () => overflows++, 2);
    writer.send(0); // buffered by the stream; write() returns false
    expect(writer.send(1)).toBe(true);
    expect(writer.send(2)).toBe(true);
    expect(writer.send(3)).toBe(false);
    expect(overflows).toBe(1);
    writer.close();
    expect(writer.send(4)).toBe(false);
    await release();
    await release();
    expect(written).toEqual([0]);
  });
});
