// The sticky part of each GPU's health (a critical XID, uncorrectable ECC errors) kept in
// the agent's data dir (gpu-health.json), so a restarted or upgraded agent does not put a
// GPU that failed back into service: NVML delivers an XID once, and the agent would
// otherwise forget it. Thermal state and ECC baselines are not kept: the next samples
// re-establish them. Written atomically; a corrupt file stops start-up with what to do.
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface StickyGpuHealth {
  xid?: number;
  ecc?: string;
}

export type StickyHealthByUuid = Record<string, StickyGpuHealth>;

export class GpuHealthFileError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'GpuHealthFileError';
  }
}

export class GpuHealthFile {
  readonly path: string;

  constructor(dataDir: string) {
    this.path = join(dataDir, 'gpu-health.json');
  }

  /** What was kept; empty when the file does not exist yet. */
  load(): StickyHealthByUuid {
    let text: string;
    try {
      text = readFileSync(this.path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return {};
      throw new GpuHealthFileError(`cannot read ${this.path}: ${(err as Error).message}`, { cause: err });
    }
    try {
      const parsed: unknown = JSON.parse(text);
      if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object');
      return parsed as StickyHealthByUuid;
    } catch (err) {
      throw new GpuHealthFileError(
        `${this.path} is not valid (${(err as Error).message}); remove it to start with every GPU healthy`,
        { cause: err },
      );
    }
  }

  save(health: StickyHealthByUuid): void {
    mkdirSync(join(this.path, '..'), { recursive: true, mode: 0o700 });
    const temporary = `${this.path}.${process.pid}.tmp`;
    writeFileSync(temporary, `${JSON.stringify(health, null, 2)}\n`);
    renameSync(temporary, this.path);
  }
}
