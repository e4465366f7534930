import { describe, expect, it } from 'vitest';
import { authorize, cookieName, cookieValue, instanceOfPath, sessionCookie } from './jupyter-auth.js';

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

  it('refuses requests without the token or with a wrong one', () => {
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels` }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels?token=wrong` }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, authorization: 'token f00dfeee' }).ok).toBe(false);
    expect(authorize(ID, TOKEN, { url: `/${ID}/api/kernels`, cookie: `${cookieName(ID)}=${TOKEN}` }).ok).toBe(false);
    // Another instance's cookie does not open this one.
    expect(authorize(ID, TOKEN, { url: `/${ID}/`, cookie: `${cookieName('inst_other')}=${cookieValue(TOKEN)}` }).ok).toBe(false);
    expect(authorize(ID, '', { url: `/${ID}/?token=` }).ok).toBe(false);
  });

  it('scopes the cookie to the instance path', () => {
    expect(sessionCookie(ID, TOKEN, false)).toBe(`${cookieName(ID)}=${cookieValue(TOKEN)}; Path=/${ID}/; HttpOnly; SameSite=Lax`);
    expect(sessionCookie(ID, TOKEN, true)).toMatch(/; Secure$/);
  });
});
