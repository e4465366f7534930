// How svcctl prints: readable tables in a terminal, JSON with --json, errors on stderr.
import Table from 'cli-table3';

export function printJson(value: unknown): void {
  process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
}

export function printTable(head: string[], rows: Array<Array<string | number>>): void {
  if (rows.length === 0) {
    process.stdout.write('(none)\n');
    return;
  }
  const table = new Table({
    head,
    style: { head: process.stdout.isTTY ? ['cyan'] : [], border: process.stdout.isTTY ? ['grey'] : [] },
    chars: { mid: '', 'left-mid': '', 'mid-mid': '', 'right-mid': '' },
  });
  table.push(...rows.map((r) => r.map(String)));
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
