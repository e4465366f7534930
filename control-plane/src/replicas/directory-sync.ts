// Keeps this process's replica directory equal to the store when other processes change
// replica rows (PostgreSQL NOTIFY): the replica holding an agent's stream marks a replica
// running, and every replica routes to it. Each notice re-reads the row, so the directory
// ends at the latest committed state whatever order notices and reads finish in: reads
// of one replica run one at a time, and a notice during a read queues one more read.
import type { ReplicaStore } from '../store/replica-store.js';
import type { LiveReplicaDirectory } from './replica-directory.js';

export class DirectorySync {
  /** Replica id -> a read is running; `true` when another notice arrived meanwhile. */
  private readonly reading = new Map<string, boolean>();

  constructor(
    private readonly store: Pick<ReplicaStore, 'get' | 'listActive'>,
    private readonly directory: LiveReplicaDirectory,
    private readonly onError: (err: unknown) => void,
  ) {}

  /** A replica row changed somewhere. */
  changed(id: string): void {
    if (this.reading.has(id)) {
      this.reading.set(id, true);
      return;
    }
    this.reading.set(id, false);
    void this.read(id);
  }

  private async read(id: string): Promise<void> {
    try {
      const record = await this.store.get(id);
      if (record) this.directory.update(record);
      else this.directory.remove(id);
    } catch (err) {
      this.onError(err);
    }
    if (this.reading.get(id)) {
      this.reading.set(id, false);
      return this.read(id);
    }
    this.reading.delete(id);
  }

  /** Notices may have been missed: the whole directory from the store. */
  async resync(): Promise<void> {
    try {
      const active = await this.store.listActive();
      const ids = new Set(active.map((r) => r.id));
      for (const live of this.directory.ready()) if (!ids.has(live.id)) this.directory.remove(live.id);
      for (const record of active) this.directory.update(record);
    } catch (err) {
      this.onError(err);
    }
  }
}
