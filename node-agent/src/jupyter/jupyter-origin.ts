// Each instance's Jupyter has a browser origin of its own: one port per instance from the
// node's Jupyter port range, so a page served by one tenant's Jupyter is cross-origin to
// every other tenant's (DESIGN 7). Pure: which ports an instance tries, in order, and the
// origin a port gives under the configured public URL.
import { createHash } from 'node:crypto';

export interface JupyterPortRange {
  /** First port of the range; 0 lets the OS pick a free port for each instance. */
  first: number;
  count: number;
}

/**
 * The ports an instance tries, in order: starting at a place derived from its id (so an
 * agent restarted with the same instances gives them their old ports, whatever the order
 * they are attached in), then the rest of the range around. [0] when the OS picks.
 */
export function portCandidates(range: JupyterPortRange, instanceId: string): number[] {
  if (range.first === 0) return [0];
  const start = createHash('sha256').update(instanceId).digest().readUInt32BE(0) % range.count;
  return Array.from({ length: range.count }, (_, i) => range.first + ((start + i) % range.count));
}

/**
 * The order an instance tries ports in, given the ports instances held before (the agent
 * remembers them across restarts, port-memory.ts): its own port from before first, then
 * its candidates not held by another instance, then those too (an instance gone while the
 * agent was down may still be remembered; it must not keep a port from a live one).
 * Derived ports alone do not survive a restart: two instances whose first candidates
 * collide get their ports in the order they happened to be attached.
 */
export function portOrder(range: JupyterPortRange, instanceId: string, remembered: ReadonlyMap<string, number>): number[] {
  const before = remembered.get(instanceId);
  // A port from before the range was changed (SVC_JUPYTER_PORT, SVC_JUPYTER_PORT_COUNT) is not tried.
  const inRange = (p: number) => range.first === 0 || (p >= range.first && p < range.first + range.count);
  const own = before !== undefined && inRange(before) ? before : undefined;
  const others = new Set([...remembered].filter(([id]) => id !== instanceId).map(([, port]) => port));
  const candidates = portCandidates(range, instanceId).filter((p) => p !== own);
  const free = candidates.filter((p) => p === 0 || !others.has(p));
  const held = candidates.filter((p) => p !== 0 && others.has(p));
  return [...(own === undefined ? [] : [own]), ...free, ...held];
}

/**
 * The origin users reach an instance's Jupyter at: the public URL with `{port}` filled
 * in (a TLS proxy in front, one name or port per instance), or http://<public host>:<port>.
 */
export function jupyterOrigin(publicUrl: string, publicHost: string, port: number): string {
  if (publicUrl) return publicUrl.replaceAll('{port}', String(port));
  const host = publicHost.includes(':') && !publicHost.startsWith('[') ? `[${publicHost}]` : publicHost;
  return `http://${host}:${port}`;
}
