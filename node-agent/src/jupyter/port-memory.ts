// The Jupyter port each instance holds, kept in the agent's data dir, so that an agent
// restarted with the same instances gives each its old port (and so its URL and browser
// origin) whatever order they are attached in. Written whole on each change (a temporary
// file renamed over the old one); a missing or unreadable file starts empty, which costs
// at most a changed URL.
import { readDataFile, writeDataFile } from '../config/data-file.js';

export class JupyterPortMemory {
  private readonly ports = new Map<string, number>();

  /** `file` undefined: kept in memory only. */
  constructor(private readonly file?: string) {
    if (!file) return;
    // Nothing saved yet, or unreadable: instances fall back to their derived ports.
    for (const [id, port] of Object.entries(readDataFile(file))) if (Number.isInteger(port)) this.ports.set(id, port as number);
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
    if (this.file) writeDataFile(this.file, this.ports);
  }
}
