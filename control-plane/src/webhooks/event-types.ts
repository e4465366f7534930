// The event types the control plane emits (spec section 6). Delivery is generic over
// the type: a subscription names the types it wants, or "*" for every one.

export const INSTANCE_LIFECYCLE = 'instance.lifecycle';
export const KEY_REVOKED = 'key.revoked';
export const MODEL_DEPRECATION_ANNOUNCED = 'model.deprecation_announced';

export const EVENT_TYPES = [INSTANCE_LIFECYCLE, KEY_REVOKED, MODEL_DEPRECATION_ANNOUNCED] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Subscribes to every event type, including ones added later. */
export const ALL_EVENT_TYPES = '*';
