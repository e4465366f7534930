import { describe, expect, it } from 'vitest';
import { peerHost } from './peer-host.js';

describe('peerHost', () => {
  it.each([
    ['127.0.0.1:51234', '127.0.0.1'],
    ['ipv4:10.1.2.3:443', '10.1.2.3'],
    ['[::1]:51234', '::1'],
    ['ipv6:[2001:db8::7]:9000', '2001:db8::7'],
    ['2001:db8::7', '2001:db8::7'],
    ['unix:/run/svc/agent.sock', 'unix:/run/svc/agent.sock'],
    ['agent-host', 'agent-host'],
  ])('%s is %s', (peer, host) => {
    expect(peerHost(peer)).toBe(host);
  });
});
