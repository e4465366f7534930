import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { createLogger, resolveLogFormat } from './logger.js';

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

describe('log format', () => {
  const sink = (isTTY: boolean) => {
    const lines: string[] = [];
    const stream = Object.assign(
      new Writable({
        write(chunk, _enc, done) {
          lines.push(String(chunk));
          done();
        },
      }),
      { isTTY },
    );
    return { stream, lines };
  };

  it.each([
    ['auto', true, 'pretty'],
    ['auto', false, 'json'],
    ['json', true, 'json'],
    ['pretty', false, 'pretty'],
  ] as const)('%s on a destination with isTTY=%s is %s', (format, isTTY, expected) => {
    expect(resolveLogFormat(format, { isTTY })).toBe(expected);
  });

  it('pretty lines (svcctl on a terminal) redact credentials too', () => {
    const { stream, lines } = sink(true);
    const log = createLogger('info', 'svcctl', stream, 'auto');
    log.warn({ key: 'svc_sk_live_x', webhook: { secret: 'whsec_x' } }, 'careful');
    const text = lines.join('').replace(/\x1b\[[0-9;]*m/g, '');
    expect(text).toMatch(/^\[\d{2}:\d{2}:\d{2}\.\d{3}\] WARN \(svcctl\): careful/);
    expect(text).toContain('[redacted]');
    expect(text).not.toContain('svc_sk_live_');
    expect(text).not.toContain('whsec_x');
  });
});
