// NVIDIA's XID catalog for Ampere and newer GPUs ("Analyzing Xid Errors with the Xid
// Catalog", docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, page of
// 2026-09): each XID's mnemonic, meaning and "Resolution Bucket (Immediate Action)".
// Shared so the node agent's health policy, the control plane's remediation and every
// operator view classify an XID the same way. Pure data and pure functions.
//
// The catalog's buckets are more than the six actions a fleet can take; where its bucket
// is a workflow or a bucket we cannot act on, `action` says what we do and `bucket` keeps
// NVIDIA's word (docs/nodes.md has the table and the reasons):
//   WORKFLOW_XID_48       -> RESET_GPU   (catalog: "a GPU reset or node reboot is needed";
//                                         the reset comes first, a failed reset escalates)
//   WORKFLOW_NVLINK_ERR   -> RESTART_BM  (XID 74: the link is shared with peer GPUs/NVSwitch,
//                                         a single-GPU reset rarely clears it)
//   WORKFLOW_NVLINK5_ERR  -> RESET_GPU   (most XID 144-150 sub-codes resolve by reset)
//   WORKFLOW_XID_45       -> IGNORE      (follows the XID that caused it)
//   XID_154               -> the driver's reported recovery action
//   RESTART_VM            -> RESTART_BM;  UPDATE_SWFW, CHECK_UVM -> CONTACT_SUPPORT

/** The actions a fleet takes, named like NVIDIA's resolution buckets. */
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

export interface XidCatalogEntry {
  mnemonic: string;
  meaning: string;
  /** NVIDIA's "Resolution Bucket (Immediate Action)", verbatim. */
  bucket: string;
  /** What this fleet does (the bucket, or our reading of a workflow bucket; see above). */
  action: XidAction;
}

const entry = (mnemonic: string, meaning: string, bucket: string, action: XidAction = bucket as XidAction): XidCatalogEntry => ({
  mnemonic,
  meaning,
  bucket,
  action,
});

/** The XIDs a data-centre fleet sees, from NVIDIA's catalog (Ampere and newer). */
export const XID_CATALOG: Readonly<Record<number, XidCatalogEntry>> = {
  8: entry('ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT', 'GPU stopped processing', 'RESTART_APP'),
  11: entry('ROBUST_CHANNEL_GR_ERROR_MISSING_HW', 'invalid or corrupted push buffer stream', 'RESTART_APP'),
  13: entry('ROBUST_CHANNEL_GR_EXCEPTION', 'graphics engine exception', 'RESTART_APP'),
  25: entry('ROBUST_CHANNEL_GR_ILLEGAL_NOTIFY', 'invalid or illegal push buffer stream', 'RESTART_APP'),
  31: entry('ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT', 'GPU memory page fault', 'RESTART_APP'),
  32: entry('ROBUST_CHANNEL_PBDMA_ERROR', 'invalid or corrupted push buffer stream', 'RESTART_APP'),
  37: entry('ROBUST_CHANNEL_FECS_ERR_UNIMP_FIRMWARE_METHOD', 'driver firmware error', 'IGNORE'),
  38: entry('ROBUST_CHANNEL_FECS_ERR_WATCHDOG_TIMEOUT', 'driver firmware error', 'IGNORE'),
  39: entry('ROBUST_CHANNEL_CE0_ERROR', 'copy engine exception', 'RESTART_APP'),
  40: entry('ROBUST_CHANNEL_CE1_ERROR', 'copy engine exception', 'RESTART_APP'),
  41: entry('ROBUST_CHANNEL_CE2_ERROR', 'copy engine exception', 'RESTART_APP'),
  43: entry('ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR', 'GPU stopped processing', 'IGNORE'),
  44: entry('ROBUST_CHANNEL_GR_FAULT_DURING_CTXSW', 'graphics engine fault during context switch', 'IGNORE'),
  45: entry('ROBUST_CHANNEL_PREEMPTIVE_REMOVAL', 'preemptive cleanup, due to previous errors', 'WORKFLOW_XID_45', 'IGNORE'),
  46: entry('ROBUST_CHANNEL_GPU_TIMEOUT_ERROR', 'GPU stopped processing', 'RESET_GPU'),
  48: entry('ROBUST_CHANNEL_GPU_ECC_DBE', 'double-bit ECC error', 'WORKFLOW_XID_48', 'RESET_GPU'),
  54: entry('SILENT_RUNNING_PWR_REDUCED_CLOCKING', 'auxiliary power is not connected to the GPU board', 'CHECK_MECHANICALS'),
  60: entry('ROBUST_CHANNEL_SEC2_ERROR', 'video processor exception', 'RESTART_APP'),
  62: entry('PMU_HALT_ERROR', 'internal micro-controller halt', 'RESET_GPU'),
  63: entry('INFOROM_DRAM_RETIREMENT_EVENT', 'GPU memory remapping event', 'IGNORE'),
  64: entry('INFOROM_DRAM_RETIREMENT_FAILURE', 'GPU memory remapping failure', 'RESET_GPU'),
  66: entry('ROBUST_CHANNEL_FECS_ERR_REG_ACCESS_VIOLATION', 'illegal access by driver', 'IGNORE'),
  67: entry('ROBUST_CHANNEL_FECS_ERR_VERIF_VIOLATION', 'illegal access by driver', 'IGNORE'),
  68: entry('ROBUST_CHANNEL_NVDEC0_ERROR', 'NVDEC0 exception', 'RESTART_APP'),
  69: entry('ROBUST_CHANNEL_GR_CLASS_ERROR', 'graphics engine class error', 'RESTART_APP'),
  74: entry('NVLINK_ERROR', 'NVLink error', 'WORKFLOW_NVLINK_ERR', 'RESTART_BM'),
  78: entry('VGPU_START_ERROR', 'vGPU start error', 'UPDATE_SWFW', 'CONTACT_SUPPORT'),
  79: entry('ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS', 'GPU has fallen off the bus', 'RESTART_BM'),
  80: entry('PBDMA_PUSHBUFFER_CRC_MISMATCH', 'corrupted data sent to GPU', 'RESTART_APP'),
  92: entry('EXCESSIVE_SBE_INTERRUPTS', 'high single-bit ECC error rate', 'IGNORE'),
  93: entry('INFOROM_ERASE_LIMIT_EXCEEDED', 'non-fatal violation of provisioned InfoROM wear limit', 'IGNORE'),
  94: entry('ROBUST_CHANNEL_CONTAINED_ERROR', 'contained memory error', 'RESTART_APP'),
  95: entry('ROBUST_CHANNEL_UNCONTAINED_ERROR', 'uncontained memory error', 'RESET_GPU'),
  109: entry('ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR', 'context switch timeout error', 'RESET_GPU'),
  110: entry('SEC_FAULT_ERROR', 'security fault error', 'RESET_GPU'),
  119: entry('GSP_RPC_TIMEOUT', 'GSP RPC timeout', 'RESET_GPU'),
  120: entry('GSP_ERROR', 'GSP error', 'RESET_GPU'),
  121: entry('C2C_ERROR', 'C2C error', 'IGNORE'),
  136: entry('ALI_TRAINING_FAIL', 'link training failed', 'RESET_GPU'),
  137: entry('NVLINK_PRIV_ERR', 'NVLink privilege error', 'IGNORE'),
  140: entry('UNRECOVERABLE_ECC_ERROR_ESCAPE', 'ECC unrecovered error', 'RESET_GPU'),
  141: entry('ROBUST_CHANNEL_FAST_PATH_ERROR', 'CUDA fast path error', 'IGNORE'),
  142: entry('ROBUST_CHANNEL_NVENC3_ERROR', 'NVENC3 error', 'CONTACT_SUPPORT'),
  143: entry('GPU_INIT_ERROR', 'GPU initialization error', 'RESET_GPU'),
  144: entry('NVLINK_SAW_ERROR', 'NVLink SAW error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  145: entry('NVLINK_RLW_ERROR', 'NVLink RLW error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  146: entry('NVLINK_TLW_ERROR', 'NVLink TLW error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  147: entry('NVLINK_TREX_ERROR', 'NVLink TREX error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  148: entry('NVLINK_NVLPW_CTRL_ERROR', 'NVLink NVLPW_CTRL error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  149: entry('NVLINK_NETIR_ERROR', 'NVLink NETIR error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  150: entry('NVLINK_MSE_ERROR', 'NVLink MSE error', 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU'),
  151: entry('ROBUST_CHANNEL_KEY_ROTATION_ERROR', 'key rotation error', 'RESTART_VM', 'RESTART_BM'),
  154: entry('GPU_RECOVERY_ACTION_CHANGED', 'GPU recovery action changed', 'XID_154', 'CONTACT_SUPPORT'),
  155: entry('NVLINK_SW_DEFINED_ERROR', 'NVLink software-defined error', 'RESET_GPU'),
  156: entry('RESOURCE_RETIREMENT_EVENT', 'resource retirement event', 'RESET_GPU'),
  157: entry('RESOURCE_RETIREMENT_FAILURE', 'resource retirement failure', 'IGNORE'),
  158: entry('GPU_FATAL_TIMEOUT', 'GPU fatal timeout', 'RESET_GPU'),
  159: entry('ROBUST_CHANNEL_CHI_NON_DATA_ERROR', 'CHI non-data error', 'CHECK_UVM', 'CONTACT_SUPPORT'),
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

/** nvmlDeviceGpuRecoveryAction_t by its value, as NVML's field reports it; undefined for a value we do not know. */
export function recoveryActionByCode(code: number): { name: string; action: XidAction } | undefined {
  const known = RECOVERY_ACTIONS.find((r) => r.code === code);
  return known ? { name: known.name, action: known.action } : undefined;
}

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
 * Classifies an XID. `message` is the driver's text where there is one and
 * `driverRecoveryAction` NVML's recovery-action field; only XID 154 reads them. XIDs the catalog does not list go to CONTACT_SUPPORT: unknown means not understood,
 * and a GPU nobody understands should not take new work.
 */
/** What an XID the catalog does not list gets: see classifyXid. */
export const UNKNOWN_XID_ACTION: XidAction = 'CONTACT_SUPPORT';

export function classifyXid(xid: number, message = '', driverRecoveryAction?: number): XidClass {
  const known = XID_CATALOG[xid];
  if (!known) return { xid, action: UNKNOWN_XID_ACTION, meaning: 'unknown XID' };
  if (xid === 154) {
    // NVML's own reading (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) beats parsing the text.
    const reported = (driverRecoveryAction === undefined ? undefined : recoveryActionByCode(driverRecoveryAction)) ?? parseRecoveryAction(message);
    if (reported) return { xid, action: reported.action, meaning: known.meaning, driverAction: reported.name };
  }
  return { xid, action: known.action, meaning: known.meaning };
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
