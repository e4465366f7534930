// Installs the rules of firewall-rules.ts on this host (the agent runs as root). Safe to
// repeat: our two chains are rewritten atomically with iptables-restore --noflush, and a
// hook is inserted only when `iptables -C` does not find it. Rules stay when the agent
// stops: the containers they protect keep running and are re-adopted by the next agent.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { FirewallRules } from './firewall-rules.js';

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
      if (hook.from === 'DOCKER-USER') await iptables(tool.iptables, ['-N', hook.from]).catch(() => undefined);
      const present = await iptables(tool.iptables, ['-C', hook.from, '-j', hook.to]).then(
        () => true,
        () => false,
      );
      if (!present) await iptables(tool.iptables, ['-I', hook.from, '1', '-j', hook.to]);
    }
  }
}

/** The rules of one of our chains as `iptables -S` prints them (for tests and operators). */
export async function listChain(family: 'ipv4' | 'ipv6', chain: string): Promise<string[]> {
  const { stdout } = await iptables(TOOLS[family].iptables, ['-S', chain]);
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
  if (e.code === 'ENOENT') return 'not installed (apt-get install iptables)';
  return (e.stderr || e.message || String(err)).trim();
};
