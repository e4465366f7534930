// The stop asked of an instance's container, kept on the instance from the first request
// until the node reports the container gone, so it can be sent again after anything that
// may have lost it (agent restart, a stream cut after the command was queued, the node
// away). Pure rules: how a new request combines with the recorded one, and what grace is
// left when it is sent again.
import type { StopAction } from './lifecycle.js';

export interface StopRequest {
  /** SIGKILL without grace (asked for, or escalated by a later forced terminate). */
  force: boolean;
  /** When the stop was first requested: the grace runs from here, across resends. */
  at: number;
  /** When it was last handed to a live session; null while no session took it. */
  sentAt: number | null;
  /**
   * Set when a reconnecting node no longer ran the container: its last contact before
   * that session, the latest moment the container is known to have run.
   */
  unseenSince?: number | null;
}

/** The request after `action`: the first request's time (and grace) is kept; force only escalates. */
export function requestStop(recorded: StopRequest | null, action: StopAction, now: number, unseenSince: number | null = null): StopRequest {
  const base: StopRequest = recorded ?? { force: false, at: now, sentAt: null };
  const withSince = unseenSince !== null && base.unseenSince == null ? { ...base, unseenSince } : base;
  return action === 'force' ? { ...withSince, force: true } : withSince;
}

/** The order to send now: what is left of the grace, counted from the first request; none left is a kill. */
export function stopTiming(stop: StopRequest, now: number, graceMs: number): { timeoutMs: number; force: boolean } {
  const left = stop.force ? 0 : Math.max(0, stop.at + graceMs - now);
  return { timeoutMs: left, force: left === 0 };
}

/**
 * A stop the node should have carried out by now (grace plus `confirmMs`) but has not
 * confirmed, and that was not sent within the last `confirmMs`: the sweep sends it again.
 */
export function stopOverdue(stop: StopRequest, now: number, graceMs: number, confirmMs: number): boolean {
  if (stop.sentAt == null) return true; // undefined: a row from before sentAt was kept
  const deadline = stop.at + (stop.force ? 0 : graceMs) + confirmMs;
  return now >= deadline && now - stop.sentAt >= confirmMs;
}
