// Docker's multiplexed exec stream (no TTY): frames of an 8-byte header (stream type
// 1 = stdout, 2 = stderr, then 3 zero bytes, then the payload size, uint32 big endian)
// followed by the payload. A pure parser, fed whatever chunks the socket delivers.

export type FrameStream = 'stdout' | 'stderr';

export interface Frame {
  stream: FrameStream;
  payload: Buffer;
}

const HEADER = 8;

export class ExecFrameParser {
  private pending: Buffer = Buffer.alloc(0);

  /** The complete frames in what has arrived so far; a partial frame waits for the next chunk. */
  push(chunk: Buffer): Frame[] {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    const frames: Frame[] = [];
    while (this.pending.length >= HEADER) {
      const size = this.pending.readUInt32BE(4);
      if (this.pending.length < HEADER + size) break;
      const type = this.pending[0];
      // 0 (stdin) never comes back; treat anything but stderr as stdout, as the Docker CLI does.
      if (size > 0) frames.push({ stream: type === 2 ? 'stderr' : 'stdout', payload: this.pending.subarray(HEADER, HEADER + size) });
      this.pending = this.pending.subarray(HEADER + size);
    }
    return frames;
  }

  /** Bytes of an unfinished frame; non-zero at the end of the stream means it was cut. */
  get buffered(): number {
    return this.pending.length;
  }
}
