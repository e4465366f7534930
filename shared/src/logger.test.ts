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

  it("pretty lines show no control character or bidirectional control a tenant's text carried, only escapes", () => {
    const { stream, lines } = sink(true);
    const log = createLogger('info', 'control-plane', stream, 'pretty');
    log.warn({ reason: 'pull failed: \u001b]0;owned\u0007 \u009b2J \u202edesrever' }, 'instance failed: \u001b[2J\u009bX\u202eY');
    const text = lines.join('');
    const colours = /\x1b\[[0-9;]*m/g;
    expect(text.replace(colours, '')).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    expect(text).toContain('\\u009b2J \\u202edesrever');
  });
});
