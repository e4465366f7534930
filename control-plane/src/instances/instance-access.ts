// How users reach an instance, control-plane side: the agent's InstanceAccess report as
// the record keeps it, and the `ssh` / `jupyter` parts of the instance object. Both are
// shown only while the instance is `ready` (the spec: endpoints go live at ready; a
// draining instance takes no new connections, a finished one has none).
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
  jupyter: { url: string; token: string } | null;
  jupyter_unavailable_reason: string | null;
}

export function accessView(r: Pick<InstanceRecord, 'status' | 'access'>): AccessView {
  const access = r.status === 'ready' ? r.access : null;
  const ssh = access?.ssh;
  return {
    ssh: ssh ? { host: ssh.host, port: ssh.port, user: ssh.user, command: sshCommand(ssh), host_key: ssh.hostKey, host_key_fingerprint: ssh.hostKeyFingerprint } : null,
    jupyter: access?.jupyter ? { url: access.jupyter.url, token: access.jupyter.token } : null,
    jupyter_unavailable_reason: access && !access.jupyter ? access.jupyterUnavailableReason : null,
  };
}

export const sameAccess = (a: InstanceAccessRecord | null, b: InstanceAccessRecord | null): boolean => JSON.stringify(a) === JSON.stringify(b);
