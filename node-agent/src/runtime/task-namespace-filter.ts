// The filter table of an instance's own network namespace: Docker leaves it empty (it
// writes only the nat table there), and the agent fills it right after the container
// starts, once the namespace exists. The tenant is root inside but holds no CAP_NET_ADMIN
// (container-spec.ts): it can read the rules and not change them. What goes in: the cap on
// DNS queries (task-dns-limit.ts) and the refusal of its own subnet (task-own-subnet.ts),
// and in the raw table, no connection tracking for anything but the embedded DNS.
//
// Docker's nat rules for its embedded DNS (127.0.0.11) turn connection tracking on in the
// namespace, so every flow the tenant starts (a datagram to each of its loopback
// addresses and ports, or to the internet) became an entry of the namespace's table:
// measured, 262,143 entries in 4 s, 64 MiB of the kernel's memory the container's memory
// limit is not charged for, renewed every 30 s, by each instance. Only the DNS rules need
// it (their replies are translated back); no rule of the agent's in the namespace reads
// connection state, and the host's own table, which its connection cap counts, is apart.
import { execFile } from 'node:child_process';
import { EMBEDDED_DNS } from './task-dns-limit.js';

/** Raw-table rules: track what goes to or comes from the embedded DNS, nothing else. */
export const UNTRACKED: readonly string[] = [
  `-A PREROUTING ! -s ${EMBEDDED_DNS}/32 ! -d ${EMBEDDED_DNS}/32 -j CT --notrack`,
  `-A OUTPUT ! -s ${EMBEDDED_DNS}/32 ! -d ${EMBEDDED_DNS}/32 -j CT --notrack`,
];

/**
 * iptables-restore input that replaces the namespace's whole filter table with `rules`
 * (OUTPUT rules), and its raw table with UNTRACKED, so a retried start comes out the same.
 */
export function namespaceFilter(rules: readonly string[]): string {
  return [
    '*raw', ':PREROUTING ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...UNTRACKED, 'COMMIT',
    '*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...rules, 'COMMIT', '',
  ].join('\n');
}

export class NamespaceFilterError extends Error {
  override readonly name = 'NamespaceFilterError';
}

/** Writes `rules` into the filter table of the network namespace of the container whose process on the host is `pid`. */
export function filterNamespace(pid: number, rules: readonly string[]): Promise<void> {
  if (!Number.isInteger(pid) || pid <= 0) return Promise.reject(new NamespaceFilterError(`cannot filter the container's network: it has no process (pid ${pid})`));
  const command = ['nsenter', `--target=${pid}`, '--net', '--', 'iptables-restore', '-w'];
  return new Promise((resolve, reject) => {
    const child = execFile(command[0]!, command.slice(1), (err, _stdout, stderr) => {
      if (!err) return resolve();
      reject(new NamespaceFilterError(`${command.join(' ')} failed: ${stderr.trim() || err.message}`, { cause: err }));
    });
    child.stdin?.end(namespaceFilter(rules));
  });
}
