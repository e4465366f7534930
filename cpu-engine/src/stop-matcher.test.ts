import { describe, expect, it } from 'vitest';
import { StopMatcher } from './stop-matcher.js';

/** Feeds the pieces; returns what was emitted and whether a stop sequence ended it. */
function run(stops: string[], pieces: string[]): { text: string; stopped: boolean } {
  const m = new StopMatcher(stops);
  let text = '';
  for (const piece of pieces) {
    const out = m.push(piece);
    text += out.text;
    if (out.stopped) return { text, stopped: true };
  }
  return { text: text + m.flush(), stopped: false };
}

describe('StopMatcher', () => {
  it('passes text through when there are no stop sequences', () => {
    expect(run([], ['ab', 'c'])).toEqual({ text: 'abc', stopped: false });
  });

  it('cuts before a stop sequence inside one piece and never emits it', () => {
    expect(run(['\n\n'], ['one\n\ntwo'])).toEqual({ text: 'one', stopped: true });
  });

  it('finds a stop sequence split across pieces, one character at a time', () => {
    expect(run(['ghi'], Array.from('abcdefghijkl'))).toEqual({ text: 'abcdef', stopped: true });
    expect(run(['END'], ['The E', 'N', 'D is near'])).toEqual({ text: 'The ', stopped: true });
  });

  it('holds back a possible start, then releases it when it turns out not to be one', () => {
    const m = new StopMatcher(['xyz']);
    expect(m.push('abx')).toEqual({ text: 'ab', stopped: false });
    expect(m.push('y')).toEqual({ text: '', stopped: false });
    expect(m.push('a')).toEqual({ text: 'xya', stopped: false });
  });

  it('releases a held-back partial match at the end of generation', () => {
    expect(run(['xyz'], ['abcxy'])).toEqual({ text: 'abcxy', stopped: false });
  });

  it('stops at the earliest of several stop sequences', () => {
    expect(run(['def', 'bc'], ['abcdef'])).toEqual({ text: 'a', stopped: true });
    expect(run(['cd', 'abcdX'], ['ab', 'cd'])).toEqual({ text: 'ab', stopped: true });
  });

  it('emits nothing after stopping', () => {
    const m = new StopMatcher(['b']);
    expect(m.push('abc')).toEqual({ text: 'a', stopped: true });
    expect(m.push('more')).toEqual({ text: '', stopped: true });
    expect(m.flush()).toBe('');
  });

  it('handles a stop sequence at the very start', () => {
    expect(run(['a'], ['abc'])).toEqual({ text: '', stopped: true });
  });
});
