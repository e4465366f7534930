// The registry's clocks, derived once from configuration: how often agents report, when
// a silent node becomes unreachable, how often buffered telemetry is written, and how
// often the deadline sweep runs. Cross-field rules fail at start-up.
import { ConfigError } from '@svc/shared';

export interface NodeTimingSettings {
  reportIntervalMs: number;
  nodeDeadlineMs: number;
  telemetryFlushMs: number;
}

export interface NodeTiming {
  reportIntervalMs: number;
  deadlineMs: number;
  flushMs: number;
  sweepMs: number;
}

/** A node is unreachable after this many report intervals of silence, unless configured. */
export const DEFAULT_DEADLINE_INTERVALS = 3;

export function resolveNodeTiming(settings: NodeTimingSettings): NodeTiming {
  const reportIntervalMs = settings.reportIntervalMs;
  const deadlineMs = settings.nodeDeadlineMs || DEFAULT_DEADLINE_INTERVALS * reportIntervalMs;
  if (deadlineMs <= reportIntervalMs) {
    throw new ConfigError(
      `SVC_NODE_DEADLINE_MS (${deadlineMs}) must exceed SVC_REPORT_INTERVAL_MS (${reportIntervalMs}), ` +
        'or every node would flap to unreachable between two reports; 3 intervals or more is sensible',
    );
  }
  const flushMs = settings.telemetryFlushMs || reportIntervalMs;
  // `svcctl nodes show` reads the store: a flush slower than the report interval makes it stale.
  if (flushMs > deadlineMs) {
    throw new ConfigError(`SVC_TELEMETRY_FLUSH_MS (${flushMs}) must not exceed the node deadline (${deadlineMs})`);
  }
  // Sweep often enough that "unreachable" comes at most a quarter deadline (or 1 s) late.
  const sweepMs = Math.max(25, Math.min(1000, Math.floor(deadlineMs / 4)));
  return { reportIntervalMs, deadlineMs, flushMs, sweepMs };
}
