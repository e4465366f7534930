import { describe, expect, it } from 'vitest';
import { ExecFrameParser } from './exec-frames.js';

const frame = (type: number, text: string): Buffer => {
  const payload = Buffer.from(text);
  const header = Buffer.alloc(8);
  header[0] = type;
  header.writeUInt32BE(payload.length, 4);
  return Buffer.concat([header, payload]);
};

describe('ExecFrameParser', () => {
  it('splits stdout and stderr frames, across any chunking', () => {
    const wire = Buffer.concat([frame(1, 'hello\n'), frame(2, 'oops\n'), frame(1, ''), frame(1, 'bye')]);
    for (const size of [1, 3, 8, 9, wire.length]) {
      const parser = new ExecFrameParser();
      const frames = [];
      for (let i = 0; i < wire.length; i += size) frames.push(...parser.push(wire.subarray(i, i + size)));
      expect(frames.map((f) => [f.stream, f.payload.toString()])).toEqual([
        ['stdout', 'hello\n'],
        ['stderr', 'oops\n'],
        ['stdout', 'bye'],
      ]);
      expect(parser.buffered).toBe(0);
    }
  });

  it('keeps a cut frame pending', () => {
    const parser = new ExecFrameParser();
    expect(parser.push(frame(1, 'abcdef').subarray(0, 10))).toEqual([]);
    expect(parser.buffered).toBe(10);
  });
});
