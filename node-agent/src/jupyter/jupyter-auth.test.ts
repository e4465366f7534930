import { describe, expect, it } from 'vitest';
import { authorize, cookieName, cookieValue, crossOriginRefusal, instanceOfPath, sessionCookie } from './jupyter-auth.js';

const ID = 'inst_abc123';
const TOKEN = 'f00dfeed';

describe('Jupyter proxy authorization', () => {
  it('finds the instance in the path', () => {
    expect(instanceOfPath('/inst_abc123/api/kernels?x=1')).toBe(ID);
    expect(instanceOfPath('/inst_abc123')).toBe(ID);
    expect(instanceOfPath('/inst_abc123?token=x')).toBe(ID);
    expect(instanceOfPath('/api/kernels')).toBeUndefined();
    expect(instanceOfPath('/inst_../etc')).toBeUndefined();
  });

  it('accepts the token as Jupyter does: query, Authorization header, or the proxy cookie', () => {
    expect(authorize(ID, TOKEN, { url: `/${ID}/tree?token=${TOKEN}` })).toEqual({ ok: true, via: 'query' });
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, authorization: `token ${TOKEN}` })).toEqual({ ok: true, via: 'header' });
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, authorization: `Bearer ${TOKEN}` })).toEqual({ ok: true, via: 'header' });
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, cookie: `a=b; ${cookieName(ID)}=${cookieValue(TOKEN)}` })).toEqual({ ok: true, via: 'cookie' });
  });

  it('is not shadowed by a same-named cookie a sibling page planted', () => {
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, cookie: `${cookieName(ID)}=planted; ${cookieName(ID)}=${cookieValue(TOKEN)}` })).toEqual({ ok: true, via: 'cookie' });
  });

  it('refuses requests without the token or with a wrong one', () => {
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels` }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels?token=wrong` }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, authorization: 'token f00dfeee' }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, cookie: `${cookieName(ID)}=${TOKEN}` }).ok).toBe(false);
    // Another instance's cookie does not open this one.
    expect(authorize(ID, TOKEN, { url: `/${ID}/`, cookie: `${cookieName('inst_other')}=${cookieValue(TOKEN)}` }).ok).toBe(false);
    expect(authorize(ID, '', { url: `/${ID}/?token=` }).ok).toBe(false);
  });

  it('lets the cookie work only from the instance\'s own origin', () => {
    const own = 'http://gpu7.example.com:8917';
    const cases: Array<[string, Parameters<typeof crossOriginRefusal>[0], Parameters<typeof crossOriginRefusal>[1], boolean]> = [
      ['a navigation (no Origin)', 'cookie', { host: 'gpu7.example.com:8917' }, true],
      ['the notebook\'s own fetch', 'cookie', { origin: own, host: 'gpu7.example.com:8917', secFetchSite: 'same-origin' }, true],
      ['the same origin under another name, Host kept by a proxy', 'cookie', { origin: 'http://10.0.0.7:8917', host: '10.0.0.7:8917' }, true],
      ['a typed URL', 'cookie', { secFetchSite: 'none' }, true],
      ['another instance\'s page (another port)', 'cookie', { origin: 'http://gpu7.example.com:8918', host: 'gpu7.example.com:8917' }, false],
      ['another port, seen by Fetch Metadata only', 'cookie', { secFetchSite: 'same-site', host: 'gpu7.example.com:8917' }, false],
      ['another site', 'cookie', { origin: 'https://evil.example', host: 'gpu7.example.com:8917', secFetchSite: 'cross-site' }, false],
      ['a sandboxed page (opaque origin)', 'cookie', { origin: 'null', host: 'gpu7.example.com:8917' }, false],
      ['a client that sends the token', 'header', { origin: 'https://evil.example', secFetchSite: 'cross-site' }, true],
      ['a URL with the token', 'query', { origin: 'http://gpu7.example.com:8918' }, true],
    ];
    for (const [what, via, request, passes] of cases) {
      expect(crossOriginRefusal(via, request, own) === undefined, what).toBe(passes);
    }
  });

  it('scopes the cookie to the instance path, out of scripts\' and other sites\' reach', () => {
    expect(sessionCookie(ID, TOKEN, false)).toBe(`${cookieName(ID)}=${cookieValue(TOKEN)}; Path=/${ID}/; HttpOnly; SameSite=Strict`);
    expect(sessionCookie(ID, TOKEN, true)).toMatch(/; Secure/);
  });
});
