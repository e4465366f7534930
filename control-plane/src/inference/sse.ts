// Server-Sent Events both ways: reading a replica's stream (complete events only, however
// the bytes were split) and framing ours.
import { StringDecoder } from 'node:string_decoder';

export class SseParser {
  private readonly decoder = new StringDecoder('utf8');
  private buffer = '';

  /** The `data` of each event completed by `chunk` (multi-line data joined with "\n"). */
  push(chunk: Buffer | string): string[] {
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.write(chunk);
    const out: string[] = [];
    for (;;) {
      const end = this.eventEnd();
      if (end === null) return out;
      const block = this.buffer.slice(0, end.at);
      this.buffer = this.buffer.slice(end.at + end.length);
      const data = block
        .split(/\r?\n/)
        .filter((line) => line.startsWith('data:'))
        .map((line) => line.slice(line.startsWith('data: ') ? 6 : 5));
      if (data.length > 0) out.push(data.join('\n'));
    }
  }

  private eventEnd(): { at: number; length: number } | null {
    const lf = this.buffer.indexOf('\n\n');
    const crlf = this.buffer.indexOf('\r\n\r\n');
    if (lf === -1 && crlf === -1) return null;
    if (crlf !== -1 && (lf === -1 || crlf < lf)) return { at: crlf, length: 4 };
    return { at: lf, length: 2 };
  }
}

export const sseFrame = (data: string): string => `data: ${data}\n\n`;
export const SSE_DONE = sseFrame('[DONE]');
