// Decodes the bitmask of nvmlDeviceGetCurrentClocksEventReasons (formerly
// ...ThrottleReasons) into names. Bit values are nvmlClocksEventReason* from nvml.h.

export const throttleReasonBits = {
  gpu_idle: 0x1,
  applications_clocks_setting: 0x2,
  sw_power_cap: 0x4,
  hw_slowdown: 0x8,
  sync_boost: 0x10,
  sw_thermal_slowdown: 0x20,
  hw_thermal_slowdown: 0x40,
  hw_power_brake_slowdown: 0x80,
  display_clock_setting: 0x100,
} as const;

export type ThrottleReason = keyof typeof throttleReasonBits;

/** The names of the bits set in `mask`, in bit order; bits newer than this table are left in the mask only. */
export function decodeThrottleReasons(mask: number): ThrottleReason[] {
  return (Object.entries(throttleReasonBits) as [ThrottleReason, number][])
    .filter(([, bit]) => (mask & bit) !== 0)
    .map(([name]) => name);
}
