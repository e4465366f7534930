// Installs the rules of firewall-rules.ts on this host (the agent runs as root). Safe to
// repeat: our chains are rewritten atomically with iptables-restore --noflush, and a
// hook is inserted only when `iptables -C` does not find it, under a host-wide lock so two
// agents starting at once (tests run several) cannot both insert it. Rules stay when the
// agent stops: the containers they protect keep running and are re-adopted by the next agent.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FirewallRules, FirewallTable } from './firewall-rules.js';

const run = promisify(execFile);

export class HostFirewallError extends Error {
  override readonly name = 'HostFirewallError';
}

type Tool = { iptables: string; restore: string };
const TOOLS: Record<'ipv4' | 'ipv6', Tool> = {
  ipv4: { iptables: 'iptables', restore: 'iptables-restore' },
  ipv6: { iptables: 'ip6tables', restore: 'ip6tables-restore' },
};

export async function installHostFirewall(rules: FirewallRules): Promise<void> {
  for (const family of ['ipv4', 'ipv6'] as const) {
    const tool = TOOLS[family];
    await restore(tool.restore, rules[family]);
    for (const hook of rules.hooks[family]) {
      // DOCKER-USER exists once Docker ran; made here when the agent starts first (Docker keeps it).
      if (hook.from === 'DOCKER-USER') await iptables(tool.iptables, ['-t', hook.table, '-N', hook.from]).catch(() => undefined);
      // Table and chain names are our constants, never input.
      const t = `${tool.iptables} -w -t ${hook.table}`;
      await locked(`${t} -C ${hook.from} -j ${hook.to} 2>/dev/null || ${t} -I ${hook.from} 1 -j ${hook.to}`);
    }
  }
}

/** The rules of one of our chains as `iptables -S` prints them (for tests and operators). */
export async function listChain(family: 'ipv4' | 'ipv6', chain: string, table: FirewallTable = 'filter'): Promise<string[]> {
  const { stdout } = await iptables(TOOLS[family].iptables, ['-t', table, '-S', chain]);
  return stdout.split('\n').filter((l) => l.startsWith('-A '));
}

async function iptables(command: string, args: string[]): Promise<{ stdout: string }> {
  try {
    // -w: wait for the xtables lock that Docker (and other agents) may hold.
    return await run(command, ['-w', ...args]);
  } catch (err) {
    throw new HostFirewallError(`${command} ${args.join(' ')} failed: ${describe(err)}`, { cause: err });
  }
}

const LOCK_FILE = '/run/lock/svc-host-firewall.lock';

/** Runs a check-then-insert under flock(1), so concurrent agents do it one at a time. */
async function locked(script: string): Promise<void> {
  try {
    await run('flock', ['-w', '30', LOCK_FILE, 'sh', '-c', script]);
  } catch (err) {
    throw new HostFirewallError(`${script} failed: ${describe(err)}`, { cause: err });
  }
}

function restore(command: string, input: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = execFile(command, ['-w', '--noflush'], (err) =>
      err ? reject(new HostFirewallError(`${command} --noflush failed: ${describe(err)}`, { cause: err })) : resolve(),
    );
    child.stdin?.end(input);
  });
}

const describe = (err: unknown): string => {
  const e = err as { code?: string; stderr?: string; message?: string };
  if (e.code === 'ENOENT') return 'a tool is missing (the agent needs iptables, ip6tables and flock: apt-get install iptables util-linux)';
  return (e.stderr || e.message || String(err)).trim();
};
