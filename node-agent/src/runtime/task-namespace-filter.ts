// The filter table of an instance's own network namespace: Docker leaves it empty (it
// writes only the nat table there), and the agent fills it right after the container
// starts, once the namespace exists. The tenant is root inside but holds no CAP_NET_ADMIN
// (container-spec.ts): it can read the rules and not change them. What goes in: the cap on
// DNS queries (task-dns-limit.ts) and the refusal of its own subnet (task-own-subnet.ts).
import { execFile } from 'node:child_process';

/**
 * iptables-restore input that replaces the namespace's whole filter table with `rules`
 * (OUTPUT rules), so a retried start comes out the same.
 */
export function namespaceFilter(rules: readonly string[]): string {
  return ['*filter', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ...rules, 'COMMIT', ''].join('\n');
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
