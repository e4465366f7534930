import { describe, expect, it } from 'vitest';
import { accessFromReport, accessView, sshCommand, withoutToken } from './instance-access.js';

const report = {
  ssh_host: 'gpu7.example.com',
  ssh_port: 2222,
  ssh_user: 'inst_abc',
  ssh_host_key: 'ssh-ed25519 AAAAC3Nza',
  ssh_host_key_fingerprint: 'SHA256:xyz',
  jupyter_url: 'http://gpu7.example.com:8890/inst_abc/?token=t0k',
  jupyter_token: 't0k',
  jupyter_unavailable_reason: '',
};

describe('instance access', () => {
  it('keeps what the agent reported', () => {
    expect(accessFromReport(report)).toEqual({
      ssh: { host: 'gpu7.example.com', port: 2222, user: 'inst_abc', hostKey: 'ssh-ed25519 AAAAC3Nza', hostKeyFingerprint: 'SHA256:xyz' },
      jupyter: { url: 'http://gpu7.example.com:8890/inst_abc/?token=t0k', token: 't0k' },
      jupyterUnavailableReason: null,
    });
    expect(accessFromReport(null)).toBeNull();
    expect(accessFromReport({ ...report, jupyter_url: '', jupyter_token: '', jupyter_unavailable_reason: 'the image has no Jupyter' })?.jupyterUnavailableReason).toBe('the image has no Jupyter');
  });

  it('writes the ssh command users paste', () => {
    expect(sshCommand({ host: 'gpu7.example.com', port: 2222, user: 'inst_abc' })).toBe('ssh -p 2222 inst_abc@gpu7.example.com');
    expect(sshCommand({ host: '10.0.0.7', port: 22, user: 'inst_abc' })).toBe('ssh inst_abc@10.0.0.7');
  });

  it('shows the endpoints only while the instance is ready', () => {
    const access = accessFromReport(report);
    const ready = accessView({ status: 'ready', access }, { revealJupyterToken: true });
    expect(ready.ssh).toEqual({ host: 'gpu7.example.com', port: 2222, user: 'inst_abc', command: 'ssh -p 2222 inst_abc@gpu7.example.com', host_key: 'ssh-ed25519 AAAAC3Nza', host_key_fingerprint: 'SHA256:xyz' });
    expect(ready.jupyter).toEqual({ url: report.jupyter_url, token: 't0k', token_redacted: false });
    expect(ready.jupyter_unavailable_reason).toBeNull();
    for (const status of ['provisioning', 'starting', 'draining', 'terminated', 'failed'] as const) {
      expect(accessView({ status, access }, { revealJupyterToken: true })).toEqual({ ssh: null, jupyter: null, jupyter_unavailable_reason: null });
    }
    const noJupyter = accessFromReport({ ...report, jupyter_url: '', jupyter_token: '', jupyter_unavailable_reason: 'the image has no Jupyter' });
    expect(accessView({ status: 'ready', access: noJupyter })).toMatchObject({ jupyter: null, jupyter_unavailable_reason: 'the image has no Jupyter' });
  });

  it('shows the Jupyter token only to those who may write the instance', () => {
    const access = accessFromReport(report);
    // The default (events, webhooks, compute:read keys): the endpoint without its token.
    for (const view of [accessView({ status: 'ready', access }), accessView({ status: 'ready', access }, { revealJupyterToken: false })]) {
      expect(view.jupyter).toEqual({ url: 'http://gpu7.example.com:8890/inst_abc/', token: null, token_redacted: true });
      expect(JSON.stringify(view)).not.toContain('t0k');
    }
  });

  it('takes the token out of a URL and nothing else', () => {
    const cases: Array<[string, string]> = [
      ['http://gpu7.example.com:8917/inst_abc/?token=t0k', 'http://gpu7.example.com:8917/inst_abc/'],
      ['https://j8917.gpu7.example.com/inst_abc/tree?a=1&token=t0k&b=2', 'https://j8917.gpu7.example.com/inst_abc/tree?a=1&b=2'],
      ['http://gpu7.example.com:8917/inst_abc/', 'http://gpu7.example.com:8917/inst_abc/'],
      ['not a url ?token=t0k', ''],
    ];
    for (const [url, stripped] of cases) expect(withoutToken(url)).toBe(stripped);
  });
});
