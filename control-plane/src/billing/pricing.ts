// Prices, as pure functions over integer micro-dollars (1e-6 USD) so sums never drift.
// Spec section 8: on-demand per second while ready or draining with a 60 s minimum;
// reservations up front, 30% off at 24 h and longer, a further 15% off at 168 h and
// longer, in-between durations at the next-lower tier; failed provisions cost nothing.

export const MICROS_PER_USD = 1_000_000;

export interface ReservationTier {
  /** Reservations at least this long get the tier's price factor. */
  minHours: number;
  factor: number;
  label: string;
}

/**
 * The spec names three tiers (24 h, 168 h, 720 h) but prices only two discounts; the
 * 720 h tier keeps the 168 h price until a provider sets its own.
 */
export const RESERVATION_TIERS: readonly ReservationTier[] = [
  { minHours: 720, factor: 0.7 * 0.85, label: '720h' },
  { minHours: 168, factor: 0.7 * 0.85, label: '168h' },
  { minHours: 24, factor: 0.7, label: '24h' },
  { minHours: 0, factor: 1, label: 'none' },
];

export const ON_DEMAND_MINIMUM_SECONDS = 60;

export const usdToMicros = (usd: number): number => Math.round(usd * MICROS_PER_USD);
export const microsToUsd = (micros: number): number => micros / MICROS_PER_USD;

export function reservationTier(hours: number): ReservationTier {
  return RESERVATION_TIERS.find((t) => hours >= t.minHours)!;
}

/** The per-GPU-hour rate a reservation of `hours` is booked at, in micro-dollars. */
export function reservationRateMicros(pricePerGpuHourUsd: number, hours: number): number {
  return Math.round(usdToMicros(pricePerGpuHourUsd) * reservationTier(hours).factor);
}

/** Charged up front for the whole duration at the booked rate. */
export function reservationChargeMicros(rateMicrosPerGpuHour: number, gpus: number, hours: number): number {
  return Math.round(rateMicrosPerGpuHour * gpus * hours);
}

/** Seconds billed for an on-demand run: per second, at least 60; zero if never ready. */
export function billableSeconds(readyMs: number | null, endMs: number): number {
  if (readyMs === null) return 0;
  const seconds = Math.ceil(Math.max(0, endMs - readyMs) / 1000);
  return Math.max(ON_DEMAND_MINIMUM_SECONDS, seconds);
}

export function onDemandChargeMicros(pricePerGpuHourUsd: number, gpus: number, seconds: number): number {
  return Math.round((usdToMicros(pricePerGpuHourUsd) * gpus * seconds) / 3600);
}
