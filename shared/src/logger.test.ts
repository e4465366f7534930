import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger } from './logger.js';

describe('logger', () => {
  it('writes JSON and redacts credentials', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    const log = createLogger('info', 'test', sink);
    log.info({ req: { headers: { authorization: 'Bearer svc_sk_live_secret' } }, key: 'svc_sk_live_x', webhook: { secret: 'whsec_x' } }, 'hello');
    const entry = JSON.parse(lines[0]!);
    expect(entry.msg).toBe('hello');
    expect(lines[0]).not.toContain('svc_sk_live_');
    expect(lines[0]).not.toContain('whsec_x');
    expect(entry.req.headers.authorization).toBe('[redacted]');
  });
});
