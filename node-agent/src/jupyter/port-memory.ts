// The Jupyter port each instance holds, kept in the agent's data dir, so that an agent
// restarted with the same instances gives each its old port (and so its URL and browser
// origin) whatever order they are attached in. Written whole on each change (a temporary
// file renamed over the old one); a missing or unreadable file starts empty, which costs
// at most a changed URL.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';

export class JupyterPortMemory {
  private readonly ports = new Map<string, number>();

  /** `file` undefined: kept in memory only. */
  constructor(private readonly file?: string) {
    if (!file) return;
    try {
      const saved = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
      for (const [id, port] of Object.entries(saved)) if (Number.isInteger(port)) this.ports.set(id, port as number);
    } catch {
      // Nothing saved yet, or unreadable: instances fall back to their derived ports.
    }
  }

  get all(): ReadonlyMap<string, number> {
    return this.ports;
  }

  /** `instanceId` holds `port` now; any other instance remembered on it no longer does. */
  remember(instanceId: string, port: number): void {
    if (this.ports.get(instanceId) === port) return;
    for (const [id, held] of this.ports) if (held === port) this.ports.delete(id);
    this.ports.set(instanceId, port);
    this.save();
  }

  forget(instanceId: string): void {
    if (this.ports.delete(instanceId)) this.save();
  }

  private save(): void {
    if (!this.file) return;
    mkdirSync(dirname(this.file), { recursive: true });
    const temporary = `${this.file}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(Object.fromEntries(this.ports))}\n`);
    renameSync(temporary, this.file);
  }
}
