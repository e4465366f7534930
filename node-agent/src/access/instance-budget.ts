// What all of one instance's SFTP sessions may hold on the node at once, across its
// connections: a per-instance budget each session draws on and gives back. Each session,
// file and listing was bounded on its own, but one instance may hold 10 connections x 32
// sessions x 64 handles, so only a budget per instance bounds what it holds in total:
// - staged uploads (images without /bin/sh): each file is staged on the node's disk and
//   put into the container whole at close, up to SVC_SFTP_STAGE_LIMIT_BYTES; 64 MiB files
//   on every handle could hold 1.3 TB of the host's disk, charged to no instance;
// - directory listings held open: a listing is read whole at OPENDIR and handed out by
//   READDIR; up to 100,000 entries (about 30 MB of the agent's memory) on every handle
//   could hold far more than the agent has, and an agent that runs out of memory leaves
//   every tenant of the node without SSH, Jupyter and reports.

export interface InstanceBudget {
  /** Reserves `amount` more; false when that would pass the instance's budget. */
  take(amount: number): boolean;
  give(amount: number): void;
  readonly limit: number;
}

export class InstanceBudgets {
  private readonly used = new Map<string, number>();

  constructor(private readonly limit: number) {}

  for(instanceId: string): InstanceBudget {
    const limit = this.limit;
    return {
      limit,
      take: (amount) => {
        const now = this.used.get(instanceId) ?? 0;
        if (now + amount > limit) return false;
        this.used.set(instanceId, now + amount);
        return true;
      },
      give: (amount) => {
        const left = (this.used.get(instanceId) ?? 0) - amount;
        if (left > 0) this.used.set(instanceId, left);
        else this.used.delete(instanceId);
      },
    };
  }

  /** What an instance holds now (for tests and logs). */
  usedBy(instanceId: string): number {
    return this.used.get(instanceId) ?? 0;
  }
}
