// The event types the control plane emits (spec section 6). Delivery is generic over
// the type: a subscription names the types it wants, or "*" for every one.

export const INSTANCE_LIFECYCLE = 'instance.lifecycle';
/** A GPU or node fault affects the instance (control-plane/src/remediation). */
export const INSTANCE_HEALTH = 'instance.health';
export const KEY_REVOKED = 'key.revoked';
export const MODEL_DEPRECATION_ANNOUNCED = 'model.deprecation_announced';
export const BILLING_BALANCE_LOW = 'billing.balance_low';
/** A user was invited to an org: the provider's hook to send the invite email. */
export const USER_INVITED = 'user.invited';
/** A user was removed from an org (its keys are revoked, each with its own key.revoked). */
export const USER_REMOVED = 'user.removed';

export const EVENT_TYPES = [INSTANCE_LIFECYCLE, INSTANCE_HEALTH, KEY_REVOKED, MODEL_DEPRECATION_ANNOUNCED, BILLING_BALANCE_LOW, USER_INVITED, USER_REMOVED] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Subscribes to every event type, including ones added later. */
export const ALL_EVENT_TYPES = '*';
