// NVIDIA's XID catalog for Ampere and newer GPUs ("Analyzing Xid Errors with the Xid
// Catalog", docs.nvidia.com/deploy/xid-errors): each XID's meaning and its resolution
// bucket (immediate action). Shared so the node agent's health policy and the control
// plane's views classify an XID the same way. Pure data and pure functions.

/** NVIDIA's resolution buckets, as the catalog spells them. */
export type XidAction = 'IGNORE' | 'RESTART_APP' | 'RESET_GPU' | 'RESTART_BM' | 'CHECK_MECHANICALS' | 'CONTACT_SUPPORT';

export interface XidClass {
  xid: number;
  action: XidAction;
  /** NVIDIA's description of the XID; 'unknown XID' when the catalog has none. */
  meaning: string;
  /** For XID 154: the recovery action the driver reported, as NVML names it. */
  driverAction?: string;
}

/** What an operator reads for each bucket. */
export const XID_ACTION_TEXT: Record<XidAction, string> = {
  IGNORE: 'no action needed',
  RESTART_APP: 'restart the application (the GPU is fine)',
  RESET_GPU: 'reset the GPU',
  RESTART_BM: 'reboot the node',
  CHECK_MECHANICALS: 'check power, cooling and seating of the GPU',
  CONTACT_SUPPORT: 'contact support',
};

/** Whether an XID of this bucket takes the GPU out of service until it is reset or replaced. */
export function actionMakesGpuUnhealthy(action: XidAction): boolean {
  return action !== 'IGNORE' && action !== 'RESTART_APP';
}

const CATALOG: Record<number, { action: XidAction; meaning: string }> = {
  8: { action: 'RESTART_APP', meaning: 'GPU stopped processing' },
  11: { action: 'RESTART_APP', meaning: 'invalid or corrupted push buffer stream' },
  13: { action: 'RESTART_APP', meaning: 'graphics engine exception' },
  31: { action: 'RESTART_APP', meaning: 'GPU memory page fault' },
  32: { action: 'RESTART_APP', meaning: 'invalid or corrupted push buffer stream' },
  43: { action: 'RESTART_APP', meaning: 'GPU stopped processing' },
  45: { action: 'IGNORE', meaning: 'preemptive cleanup, due to previous errors' },
  48: { action: 'RESET_GPU', meaning: 'double-bit ECC error' },
  54: { action: 'CHECK_MECHANICALS', meaning: 'auxiliary power is not connected to the GPU board' },
  61: { action: 'RESET_GPU', meaning: 'internal micro-controller breakpoint/warning' },
  62: { action: 'RESET_GPU', meaning: 'internal micro-controller halt' },
  63: { action: 'RESET_GPU', meaning: 'ECC page retirement or row remapping recording event' },
  64: { action: 'RESET_GPU', meaning: 'ECC page retirement or row remapper recording failure' },
  68: { action: 'RESTART_APP', meaning: 'video processor exception' },
  69: { action: 'RESTART_APP', meaning: 'graphics engine class error' },
  74: { action: 'RESET_GPU', meaning: 'NVLink error' },
  79: { action: 'RESTART_BM', meaning: 'GPU has fallen off the bus' },
  92: { action: 'CONTACT_SUPPORT', meaning: 'high single-bit ECC error rate' },
  94: { action: 'RESTART_APP', meaning: 'contained ECC error' },
  95: { action: 'RESET_GPU', meaning: 'uncontained ECC error' },
  109: { action: 'RESTART_APP', meaning: 'context switch timeout' },
  119: { action: 'RESET_GPU', meaning: 'GSP RPC timeout' },
  120: { action: 'RESET_GPU', meaning: 'GSP error' },
  121: { action: 'RESET_GPU', meaning: 'C2C link corrected error' },
  140: { action: 'RESET_GPU', meaning: 'unrecovered ECC error' },
  154: { action: 'CONTACT_SUPPORT', meaning: 'GPU recovery action changed' },
};

/**
 * nvmlDeviceGpuRecoveryAction_t, which XID 154 reports ("GPU recovery action changed from
 * 0x0 (None) to 0x1 (GPU Reset Required)"): the driver's own verdict overrides the bucket.
 */
const RECOVERY_ACTIONS: ReadonlyArray<{ code: number; name: string; pattern: RegExp; action: XidAction }> = [
  { code: 0, name: 'NONE', pattern: /\bnone\b/i, action: 'IGNORE' },
  { code: 1, name: 'GPU_RESET', pattern: /gpu reset required|\breset gpu\b/i, action: 'RESET_GPU' },
  { code: 2, name: 'NODE_REBOOT', pattern: /node reboot required|\breboot node\b/i, action: 'RESTART_BM' },
  { code: 3, name: 'DRAIN_P2P', pattern: /drain p2p(?! and reset)/i, action: 'RESET_GPU' },
  { code: 4, name: 'DRAIN_AND_RESET', pattern: /drain (p2p )?and reset/i, action: 'RESET_GPU' },
  { code: 5, name: 'RECOVER_IMEX_DOMAIN', pattern: /imex/i, action: 'CONTACT_SUPPORT' },
  { code: 6, name: 'BUS_RESET', pattern: /bus reset/i, action: 'RESET_GPU' },
  { code: 7, name: 'SYSTEM_REBOOT', pattern: /system reboot|reboot the system/i, action: 'RESTART_BM' },
];

/**
 * The recovery action an XID 154 message reports, by code or by name; the last one named
 * wins ("changed from 0x0 (None) to 0x2 (Node Reboot Required)" is NODE_REBOOT).
 * Undefined when the message names none.
 */
export function parseRecoveryAction(message: string): { name: string; action: XidAction } | undefined {
  const to = /\bto\s+(0x[0-9a-f]+|\d+)/i.exec(message);
  if (to?.[1] !== undefined) {
    const code = Number(to[1]);
    const known = RECOVERY_ACTIONS.find((r) => r.code === code);
    if (known) return { name: known.name, action: known.action };
  }
  // By name: the part after "to" if there is one, else the whole message.
  const tail = /\bto\b([\s\S]*)$/i.exec(message)?.[1] ?? message;
  const named = RECOVERY_ACTIONS.filter((r) => r.code !== 0).find((r) => r.pattern.test(tail)) ??
    RECOVERY_ACTIONS.find((r) => r.pattern.test(tail));
  return named ? { name: named.name, action: named.action } : undefined;
}

/**
 * Classifies an XID. `message` is the driver's text where there is one; only XID 154 reads
 * it. XIDs the catalog does not list go to CONTACT_SUPPORT: unknown means not understood,
 * and a GPU nobody understands should not take new work.
 */
export function classifyXid(xid: number, message = ''): XidClass {
  const entry = CATALOG[xid];
  if (!entry) return { xid, action: 'CONTACT_SUPPORT', meaning: 'unknown XID' };
  if (xid === 154) {
    const reported = parseRecoveryAction(message);
    if (reported) return { xid, action: reported.action, meaning: entry.meaning, driverAction: reported.name };
  }
  return { xid, action: entry.action, meaning: entry.meaning };
}

/** "XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)". */
export function describeXidClass(c: XidClass): string {
  const driver = c.driverAction ? `, as the driver reports (${c.driverAction})` : '';
  return `XID ${c.xid}: ${c.meaning}; recommended action: ${XID_ACTION_TEXT[c.action]} (${c.action})${driver}`;
}

const ACTIONS = Object.keys(XID_ACTION_TEXT) as XidAction[];

/**
 * The recommended action of a recorded XID event: the bucket the agent wrote into its
 * message (it knew the driver's text), else the catalog's for the bare number (an older
 * agent's "XID 79: GPU has fallen off the bus").
 */
export function recommendedActionOf(xid: number, message: string): XidAction {
  const written = /recommended action: [^()]*\(([A-Z_]+)\)/.exec(message)?.[1];
  const known = ACTIONS.find((a) => a === written);
  return known ?? classifyXid(xid, message).action;
}
