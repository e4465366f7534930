// Small JSON files in the agent's data dir that remember something across restarts
// (Jupyter ports, image use). Written whole: a temporary file renamed over the old one, so
// a crash leaves the old file or the new one, never half of one.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

/** The file's entries; empty when it is missing or unreadable (the caller starts afresh). */
export function readDataFile(file: string): Record<string, unknown> {
  try {
    const saved: unknown = JSON.parse(readFileSync(file, 'utf8'));
    return saved !== null && typeof saved === 'object' && !Array.isArray(saved) ? (saved as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

export function writeDataFile(file: string, entries: ReadonlyMap<string, unknown>): void {
  mkdirSync(dirname(file), { recursive: true });
  const temporary = `${file}.tmp`;
  writeFileSync(temporary, `${JSON.stringify(Object.fromEntries(entries))}\n`);
  renameSync(temporary, file);
}
