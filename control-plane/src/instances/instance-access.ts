// How users reach an instance, control-plane side: the agent's InstanceAccess report as
// the record keeps it, and the `ssh` / `jupyter` parts of the instance object. Both are
// shown only while the instance is `ready` (the spec: endpoints go live at ready; a
// draining instance takes no new connections, a finished one has none). The Jupyter token
// runs code in the instance, so it is shown only to keys that may write the instance
// (compute:write); everyone else, `instance.lifecycle` events and webhooks included, gets
// the endpoint without it.
import type { InstanceAccess__Output } from '@svc/proto';
import type { InstanceAccessRecord, InstanceRecord } from './instance-record.js';

/** The agent's report as the record keeps it; null when the agent sent none (protocol 1 agents). */
export function accessFromReport(report: InstanceAccess__Output | null | undefined): InstanceAccessRecord | null {
  if (!report) return null;
  return {
    ssh: report.ssh_port > 0 && report.ssh_host
      ? { host: report.ssh_host, port: report.ssh_port, user: report.ssh_user, hostKey: report.ssh_host_key, hostKeyFingerprint: report.ssh_host_key_fingerprint }
      : null,
    jupyter: report.jupyter_url ? { url: report.jupyter_url, token: report.jupyter_token } : null,
    jupyterUnavailableReason: report.jupyter_url ? null : report.jupyter_unavailable_reason || 'the node did not say why',
  };
}

/** `ssh -p 2222 inst_x@host` (the port only when it is not 22; IPv6 hosts as they are). */
export function sshCommand(ssh: { host: string; port: number; user: string }): string {
  return `ssh ${ssh.port === 22 ? '' : `-p ${ssh.port} `}${ssh.user}@${ssh.host}`;
}

export interface AccessView {
  ssh: { host: string; port: number; user: string; command: string; host_key: string; host_key_fingerprint: string } | null;
  jupyter: JupyterView | null;
  jupyter_unavailable_reason: string | null;
}

/** With the token for those who may write the instance; otherwise the endpoint alone and `token_redacted`. */
export type JupyterView = { url: string; token: string; token_redacted: false } | { url: string; token: null; token_redacted: true };

/** Who is looking: the token is revealed only when asked for (a compute:write key). */
export interface ViewerRights {
  revealJupyterToken: boolean;
}

export const REDACTED: ViewerRights = { revealJupyterToken: false };

export function accessView(r: Pick<InstanceRecord, 'status' | 'access'>, viewer: ViewerRights = REDACTED): AccessView {
  const access = r.status === 'ready' ? r.access : null;
  const ssh = access?.ssh;
  return {
    ssh: ssh ? { host: ssh.host, port: ssh.port, user: ssh.user, command: sshCommand(ssh), host_key: ssh.hostKey, host_key_fingerprint: ssh.hostKeyFingerprint } : null,
    jupyter: access?.jupyter ? jupyterView(access.jupyter, viewer) : null,
    jupyter_unavailable_reason: access && !access.jupyter ? access.jupyterUnavailableReason : null,
  };
}

function jupyterView(jupyter: { url: string; token: string }, viewer: ViewerRights): JupyterView {
  if (viewer.revealJupyterToken) return { url: jupyter.url, token: jupyter.token, token_redacted: false };
  return { url: withoutToken(jupyter.url), token: null, token_redacted: true };
}

/** The URL with its `token` query parameter removed (and nothing else changed). */
export function withoutToken(url: string): string {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return '';
  }
  u.searchParams.delete('token');
  return u.toString();
}

export const sameAccess = (a: InstanceAccessRecord | null, b: InstanceAccessRecord | null): boolean => JSON.stringify(a) === JSON.stringify(b);
