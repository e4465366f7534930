// The pure decisions of an SSH session: what runs for `shell` and `exec` requests, which
// environment a client may pass, signal names, and where a forwarded port may go.

/** Environment names a client may set (SendEnv / SetEnv); values must not hold NUL. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,255}$/;

export function envAccepted(name: string, value: string): boolean {
  return ENV_NAME.test(name) && !value.includes('\0') && value.length <= 32 * 1024;
}

/**
 * The terminal size a session gets: what the client asked for, cut to `max` rows and
 * columns (a huge size costs the programs in the container memory), 24x80 for nonsense.
 */
export function clampTerminal(rows: number, cols: number, max: number): { rows: number; cols: number } {
  const fit = (n: number, fallback: number): number => (Number.isInteger(n) && n > 0 ? Math.min(n, max) : fallback);
  return { rows: fit(rows, 24), cols: fit(cols, 80) };
}

/** `ssh host CMD` runs CMD through the shell, as sshd does with the user's shell. */
export function execCommand(command: string): string[] {
  return ['/bin/sh', '-c', command];
}

/** The interactive shell: bash when the image has it, else sh. */
export function shellCommand(hasBash: boolean): string[] {
  return [hasBash ? '/bin/bash' : '/bin/sh'];
}

/**
 * A terminal session's command, run after setting the terminal's size from inside: engines
 * before API 1.42 create an exec's terminal without a size and only take the resize once
 * the process runs, so a quick `stty size` or a full-screen program would see 0x0.
 */
export function withTerminalSize(cmd: string[], rows: number, cols: number): string[] {
  return ['/bin/sh', '-c', `stty rows ${Math.trunc(rows)} cols ${Math.trunc(cols)} 2>/dev/null; exec "$@"`, 'sh', ...cmd];
}

const SIGNALS = new Set(['ABRT', 'ALRM', 'FPE', 'HUP', 'ILL', 'INT', 'KILL', 'PIPE', 'QUIT', 'SEGV', 'TERM', 'USR1', 'USR2']);

/** An SSH signal name (RFC 4254: "INT", without SIG) as Node names it; undefined when unknown. */
export function signalName(name: string): NodeJS.Signals | undefined {
  const bare = name.replace(/^SIG/, '');
  return SIGNALS.has(bare) ? (`SIG${bare}` as NodeJS.Signals) : undefined;
}

/**
 * Where `ssh -L` traffic for `host` goes: the container itself, at its address on the
 * Docker network. Loopback names mean the container (as they would inside it); any other
 * destination is refused, so the gateway is no proxy into the node's own network.
 */
export function forwardTarget(host: string, containerIp: string | null): string | undefined {
  if (!containerIp) return undefined;
  const h = host.toLowerCase().replace(/^\[|\]$/g, '');
  if (h === 'localhost' || h === '::1' || h === '0.0.0.0' || /^127\.\d+\.\d+\.\d+$/.test(h) || h === containerIp) return containerIp;
  return undefined;
}
