// How svcctl prints: readable tables in a terminal, JSON with --json, errors on stderr.
//
// What svcctl prints comes from tenants too: key names, instance labels, a registry's error
// quoted in an instance's failure_reason. A terminal acts on the control characters and
// escape sequences it is sent (it sets its title, rewrites lines already shown, writes to the
// clipboard, answers queries as if typed), and bidirectional controls reorder what is shown,
// so a tenant could dress up or hide what an operator reads (kubectl's CVE-2021-25743). svcctl
// prints every such character as an escape (`\x1b`, `\u202e`), never as itself.
import Table from 'cli-table3';

/** C0 and C1 controls, DEL, and Unicode's bidirectional controls. */
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** The same, less the line breaks and tabs svcctl's own lines are made of. */
const UNSAFE_IN_LINES = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
/** What JSON.stringify leaves as itself (it escapes C0 already). */
const UNSAFE_IN_JSON = /[\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

const escaped = (c: string): string => {
  const code = c.charCodeAt(0);
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
};

/** `text` as one inert line: every control character, line breaks included, as an escape. */
export const inert = (text: string): string => text.replace(UNSAFE, escaped);

const linesOf = (text: string): string => text.replace(UNSAFE_IN_LINES, escaped);

/** Writes `text` to stdout with every control character but its line breaks and tabs as an escape. */
export function say(text: string): void {
  process.stdout.write(linesOf(text));
}

/** As say(), to stderr: error messages quote what the server sent. */
export function complain(text: string): void {
  process.stderr.write(linesOf(text));
}

export function printJson(value: unknown): void {
  // \u escapes are JSON's own: a program reading the output gets the same strings.
  const json = JSON.stringify(value, null, 2).replace(UNSAFE_IN_JSON, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  process.stdout.write(`${json}\n`);
}

export function printTable(head: string[], rows: Array<Array<string | number>>): void {
  if (rows.length === 0) {
    say('(none)\n');
    return;
  }
  const table = new Table({
    head,
    style: { head: process.stdout.isTTY ? ['cyan'] : [], border: process.stdout.isTTY ? ['grey'] : [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  table.push(...rows.map((r) => r.map((cell) => inert(String(cell)))));
  process.stdout.write(`${table.toString()}\n`);
}

/** `a,b c` -> ['a', 'b', 'c']: lists may be given with commas or spaces. */
export function splitList(text: string): string[] {
  return text.split(/[\s,]+/).filter(Boolean);
}

/** A flag's value as a whole number >= min, or the error svcctl prints. */
export function wholeNumber(text: string, flag: string, min: number): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < min) throw new Error(`${flag} must be a whole number >= ${min}`);
  return n;
}

/** `12s ago` from an RFC 3339 time (or '-'), the way tables show how long since. */
export function agoFrom(iso: string | null, now: number): string {
  if (iso === null) return '-';
  const s = Math.max(0, Math.round((now - Date.parse(iso)) / 1000));
  return s < 60 ? `${s}s ago` : s < 3600 ? `${Math.floor(s / 60)}m ago` : `${Math.floor(s / 3600)}h ago`;
}
