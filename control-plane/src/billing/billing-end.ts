// When on-demand billing of an instance ends (spec section 8, DESIGN section 7: "billing
// ends when the container stopped, as the node saw it"). A pure rule over what is known.

/**
 * The moment billing ends, or null when the instance never became ready (nothing billed).
 * - `stoppedAt`: when the container stopped as the node's Docker recorded it (FinishedAt),
 *   reported by the agent; the best evidence, used when present.
 * - `lastContact`: otherwise the latest moment the container was known to run (the node's
 *   last contact before it came back without it, or before an operator forgot it).
 * - neither: `now` (a live node reported it gone just now).
 * Clamped to [readyAt, now]: never before it became ready, never into the future (a node
 * with a clock ahead cannot bill time that has not passed).
 */
export function billedUntil(readyAt: number | null, stoppedAt: number | null, lastContact: number | null, now: number): number | null {
  if (readyAt === null) return null;
  const end = stoppedAt ?? lastContact ?? now;
  return Math.min(Math.max(end, readyAt), now);
}
