// When the primary restarts a worker that died. Pure, so the schedule is table-tested:
// a worker that crashes right after starting (a bad deploy, the database down) is
// restarted ever more slowly instead of in a hot loop; one that ran for a while before
// dying starts over from the shortest wait.

export const RESTART_MIN_MS = 100;
export const RESTART_MAX_MS = 10_000;
/** A worker that lived this long had a real run: its death does not extend the streak. */
export const STABLE_AFTER_MS = 30_000;

/** Crashes in a row (each soon after its start) that led to this one, counting it. */
export function nextCrashStreak(previousStreak: number, livedMs: number): number {
  return livedMs >= STABLE_AFTER_MS ? 1 : previousStreak + 1;
}

/** Wait before the restart that follows the `streak`-th quick crash in a row (1-based). */
export function restartDelayMs(streak: number): number {
  return Math.min(RESTART_MAX_MS, RESTART_MIN_MS * 2 ** Math.max(0, streak - 1));
}
