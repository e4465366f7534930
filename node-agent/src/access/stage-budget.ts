// The node's disk SFTP uploads of one instance may hold in staging at once. An image
// without /bin/sh gets each written file staged on the node (in the agent's temporary
// directory, on the host's disk) and put into the container whole at close; each file is
// held to SVC_SFTP_STAGE_LIMIT_BYTES, but nothing bounded how many: 10 connections x 32
// sessions x 64 open files of 64 MiB is 1.3 TB of the host's disk, charged to no
// instance's disk limit. Every session of an instance draws on one budget, reserved as a
// staged file grows and given back when it is put or dropped.

export interface StageBudget {
  /** Reserves `bytes` more; false when that would pass the instance's budget. */
  take(bytes: number): boolean;
  give(bytes: number): void;
  readonly limitBytes: number;
}

export class StageBudgets {
  private readonly used = new Map<string, number>();

  constructor(private readonly limitBytes: number) {}

  for(instanceId: string): StageBudget {
    const limitBytes = this.limitBytes;
    return {
      limitBytes,
      take: (bytes) => {
        const now = this.used.get(instanceId) ?? 0;
        if (now + bytes > limitBytes) return false;
        this.used.set(instanceId, now + bytes);
        return true;
      },
      give: (bytes) => {
        const left = (this.used.get(instanceId) ?? 0) - bytes;
        if (left > 0) this.used.set(instanceId, left);
        else this.used.delete(instanceId);
      },
    };
  }

  /** Bytes an instance holds in staging now (for tests and logs). */
  usedBy(instanceId: string): number {
    return this.used.get(instanceId) ?? 0;
  }
}
