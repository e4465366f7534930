import { describe, expect, it } from 'vitest';
import { systemFingerprint } from './fingerprint.js';

describe('systemFingerprint', () => {
  it('is stable for one setup and changes with model, quantization or runtime', () => {
    const base = systemFingerprint('tiny-chat', 'int4', 'img:1');
    expect(base).toMatch(/^fp_[0-9a-f]{12}$/);
    expect(systemFingerprint('tiny-chat', 'int4', 'img:1')).toBe(base);
    expect(systemFingerprint('tiny-chat', 'fp16', 'img:1')).not.toBe(base);
    expect(systemFingerprint('other', 'int4', 'img:1')).not.toBe(base);
    expect(systemFingerprint('tiny-chat', 'int4', 'img:2')).not.toBe(base);
  });

  it('does not confuse field boundaries', () => {
    expect(systemFingerprint('a', 'bc', 'd')).not.toBe(systemFingerprint('ab', 'c', 'd'));
  });
});
