import { describe, expect, it } from 'vitest';
import { SseParser, sseFrame } from './sse.js';

describe('SseParser', () => {
  it('returns complete events however the bytes are split, multi-byte characters included', () => {
    const wire = Buffer.from(sseFrame('{"a":"é"}') + ': comment\n\n' + 'data: line1\ndata: line2\r\n\r\n' + sseFrame('[DONE]'));
    const parser = new SseParser();
    const out: string[] = [];
    for (let i = 0; i < wire.length; i += 3) out.push(...parser.push(wire.subarray(i, i + 3)));
    expect(out).toEqual(['{"a":"é"}', 'line1\nline2', '[DONE]']);
  });

  it('keeps an unfinished event until its end arrives', () => {
    const parser = new SseParser();
    expect(parser.push('data: {"x":')).toEqual([]);
    expect(parser.push('1}\n\n')).toEqual(['{"x":1}']);
  });
});
