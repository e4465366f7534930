import { describe, expect, it } from 'vitest';
import { accessReport, homeOf, type AccessEndpoints } from './instance-access.js';

const endpoints: AccessEndpoints = {
  publicHost: 'gpu7.example.com',
  sshPort: 2222,
  hostKey: { privateKey: '', publicKey: 'ssh-ed25519 AAAAC3Nza', fingerprint: 'SHA256:abc' },
  jupyterPorts: { first: 8900, count: 100 },
};

describe('instance access report', () => {
  it('carries the SSH endpoint and the Jupyter URL on the instance\'s own origin, with its token', () => {
    expect(accessReport(endpoints, { instanceId: 'inst_1', jupyter: { port: 8888, baseUrl: '/inst_1/' }, jupyterToken: 't0k', jupyterUnavailableReason: null }, 'https://j8917.gpu7.example.com')).toEqual({
      ssh_host: 'gpu7.example.com',
      ssh_port: 2222,
      ssh_user: 'inst_1',
      ssh_host_key: 'ssh-ed25519 AAAAC3Nza',
      ssh_host_key_fingerprint: 'SHA256:abc',
      jupyter_url: 'https://j8917.gpu7.example.com/inst_1/?token=t0k',
      jupyter_token: 't0k',
      jupyter_unavailable_reason: '',
    });
  });

  it('gives the reason, and no token, when there is no Jupyter', () => {
    const report = accessReport(endpoints, { instanceId: 'inst_1', jupyter: null, jupyterToken: 't0k', jupyterUnavailableReason: 'the image has no Jupyter' }, undefined);
    expect(report).toMatchObject({ jupyter_url: '', jupyter_token: '', jupyter_unavailable_reason: 'the image has no Jupyter' });
  });

  it('finds the home directory of the container user', () => {
    expect(homeOf(undefined, undefined)).toBe('/root');
    expect(homeOf('root', undefined)).toBe('/root');
    expect(homeOf('0:0', undefined)).toBe('/root');
    expect(homeOf('1000', undefined)).toBe('/');
    expect(homeOf('1000', '/home/jovyan')).toBe('/home/jovyan');
  });
});
