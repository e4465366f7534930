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
