import { describe, expect, it } from 'vitest';
import { escapeHtml, html } from './html.js';

describe('html', () => {
  it.each([
    ['<script>alert(1)</script>', '&lt;script&gt;alert(1)&lt;/script&gt;'],
    [`"><img src=x onerror='x'>`, '&quot;&gt;&lt;img src=x onerror=&#39;x&#39;&gt;'],
    ['a & b', 'a &amp; b'],
    ['&amp;', '&amp;amp;'],
    ['plain', 'plain'],
  ])('escapes %s', (input, out) => expect(escapeHtml(input)).toBe(out));

  it('escapes every interpolated value, in text and in attributes, and keeps nested markup made by html', () => {
    const name = '<b onclick="x">';
    const inner = html`<i>${name}</i>`;
    expect(html`<p title="${name}">${inner}${[html`<br>`, name]}${null}${undefined}${false}${0}</p>`.text).toBe(
      '<p title="&lt;b onclick=&quot;x&quot;&gt;"><i>&lt;b onclick=&quot;x&quot;&gt;</i><br>&lt;b onclick=&quot;x&quot;&gt;0</p>',
    );
  });
});
