// Short names of the XIDs an operator meets most, from NVIDIA's XID catalogue, so the
// health timeline says "XID 79: GPU has fallen off the bus" rather than a bare number.
const XID_NAMES: Record<number, string> = {
  13: 'graphics engine exception',
  31: 'GPU memory page fault',
  32: 'invalid or corrupted push buffer stream',
  43: 'GPU stopped processing',
  45: 'preemptive cleanup after a previous error',
  48: 'double-bit ECC error',
  61: 'internal micro-controller breakpoint/warning',
  62: 'internal micro-controller halt',
  63: 'ECC page retirement or row remapping recording event',
  64: 'ECC page retirement or row remapper recording failure',
  68: 'video processor exception',
  74: 'NVLink error',
  79: 'GPU has fallen off the bus',
  92: 'high single-bit ECC error rate',
  94: 'contained ECC error',
  95: 'uncontained ECC error',
  109: 'context switch timeout',
  119: 'GSP RPC timeout',
  120: 'GSP error',
};

export function describeXid(xid: number): string {
  const name = XID_NAMES[xid];
  return name ? `XID ${xid}: ${name}` : `XID ${xid}`;
}
