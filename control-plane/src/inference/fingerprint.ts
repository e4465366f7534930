// `system_fingerprint` (spec 2.2): a hash of what shapes a completion — model,
// quantization and the serving runtime (engine image) — so it stays stable while the
// operator's setup is unchanged and changes when any of the three does.
import { createHash } from 'node:crypto';

export function systemFingerprint(model: string, quantization: string, runtime: string): string {
  return `fp_${createHash('sha256').update(`${model}\0${quantization}\0${runtime}`).digest('hex').slice(0, 12)}`;
}
