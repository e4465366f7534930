// `system_fingerprint` (spec 2.2): a hash of what shapes a completion — model,
// quantization and the serving runtime (engine image) — so it stays stable while the
// operator's setup is unchanged and changes when any of the three does.
import { createHash } from 'node:crypto';

const known = new Map<string, string>();

export function systemFingerprint(model: string, quantization: string, runtime: string): string {
  const setup = `${model}\0${quantization}\0${runtime}`;
  let fingerprint = known.get(setup);
  if (fingerprint === undefined) {
    // Computed once per setup: it is asked for on every response.
    fingerprint = `fp_${createHash('sha256').update(setup).digest('hex').slice(0, 12)}`;
    if (known.size > 10_000) known.clear();
    known.set(setup, fingerprint);
  }
  return fingerprint;
}
