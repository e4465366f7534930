import { describe, expect, it } from 'vitest';
import { actionMakesGpuUnhealthy, classifyXid, XID_CATALOG, describeXidClass, parseRecoveryAction, recommendedActionOf, type XidAction } from './xid-catalog.js';

describe('classifyXid', () => {
  // NVIDIA's catalog (Ampere and newer): immediate-action bucket, and what we do with it.
  it.each<[number, string, XidAction, string]>([
    [8, 'RESTART_APP', 'RESTART_APP', 'GPU stopped processing'],
    [13, 'RESTART_APP', 'RESTART_APP', 'graphics engine exception'],
    [31, 'RESTART_APP', 'RESTART_APP', 'GPU memory page fault'],
    [32, 'RESTART_APP', 'RESTART_APP', 'invalid or corrupted push buffer stream'],
    [38, 'IGNORE', 'IGNORE', 'driver firmware error'],
    [43, 'IGNORE', 'IGNORE', 'GPU stopped processing'],
    [45, 'WORKFLOW_XID_45', 'IGNORE', 'preemptive cleanup, due to previous errors'],
    [48, 'WORKFLOW_XID_48', 'RESET_GPU', 'double-bit ECC error'],
    [62, 'RESET_GPU', 'RESET_GPU', 'internal micro-controller halt'],
    [63, 'IGNORE', 'IGNORE', 'GPU memory remapping event'],
    [64, 'RESET_GPU', 'RESET_GPU', 'GPU memory remapping failure'],
    [68, 'RESTART_APP', 'RESTART_APP', 'NVDEC0 exception'],
    [69, 'RESTART_APP', 'RESTART_APP', 'graphics engine class error'],
    [74, 'WORKFLOW_NVLINK_ERR', 'RESTART_BM', 'NVLink error'],
    [79, 'RESTART_BM', 'RESTART_BM', 'GPU has fallen off the bus'],
    [92, 'IGNORE', 'IGNORE', 'high single-bit ECC error rate'],
    [94, 'RESTART_APP', 'RESTART_APP', 'contained memory error'],
    [95, 'RESET_GPU', 'RESET_GPU', 'uncontained memory error'],
    [119, 'RESET_GPU', 'RESET_GPU', 'GSP RPC timeout'],
    [120, 'RESET_GPU', 'RESET_GPU', 'GSP error'],
    [121, 'IGNORE', 'IGNORE', 'C2C error'],
    [140, 'RESET_GPU', 'RESET_GPU', 'ECC unrecovered error'],
    [143, 'RESET_GPU', 'RESET_GPU', 'GPU initialization error'],
    [149, 'WORKFLOW_NVLINK5_ERR', 'RESET_GPU', 'NVLink NETIR error'],
    [54, 'CHECK_MECHANICALS', 'CHECK_MECHANICALS', 'auxiliary power is not connected to the GPU board'],
    [154, 'XID_154', 'CONTACT_SUPPORT', 'GPU recovery action changed'],
  ])('XID %i: bucket %s, action %s (%s)', (xid, bucket, action, meaning) => {
    expect(XID_CATALOG[xid]).toMatchObject({ bucket, action, meaning });
    expect(classifyXid(xid)).toEqual({ xid, action, meaning });
  });

  it.each([250, 0, 61, 1000])('XID %i is not in the catalog: contact support, the GPU takes no new work', (xid) => {
    expect(classifyXid(xid)).toEqual({ xid, action: 'CONTACT_SUPPORT', meaning: 'unknown XID' });
    expect(actionMakesGpuUnhealthy(classifyXid(xid).action)).toBe(true);
  });

  it("XID 154 follows NVML's recovery-action field over the message", () => {
    expect(classifyXid(154, '', 1)).toMatchObject({ action: 'RESET_GPU', driverAction: 'GPU_RESET' });
    expect(classifyXid(154, 'changed from 0x0 (None) to 0x1 (GPU Reset Required)', 2)).toMatchObject({ action: 'RESTART_BM', driverAction: 'NODE_REBOOT' });
    expect(classifyXid(154, 'to 0x1 (GPU Reset Required)', 99)).toMatchObject({ action: 'RESET_GPU', driverAction: 'GPU_RESET' });
    expect(classifyXid(48, '', 2).action).toBe('RESET_GPU');
  });

  it.each<[string, XidAction, string]>([
    ['GPU recovery action changed from 0x0 (None) to 0x1 (GPU Reset Required)', 'RESET_GPU', 'GPU_RESET'],
    ['GPU recovery action changed from 0x0 (None) to 0x2 (Node Reboot Required)', 'RESTART_BM', 'NODE_REBOOT'],
    ['GPU recovery action changed from 0x1 (GPU Reset Required) to 0x0 (None)', 'IGNORE', 'NONE'],
    ['GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)', 'RESET_GPU', 'DRAIN_AND_RESET'],
    ['GPU recovery action changed from 0x0 (None) to 0x7 (System Reboot)', 'RESTART_BM', 'SYSTEM_REBOOT'],
    ['recovery action: Node Reboot Required', 'RESTART_BM', 'NODE_REBOOT'],
  ])("XID 154 honours the driver's action: %s", (message, action, driverAction) => {
    expect(classifyXid(154, message)).toMatchObject({ xid: 154, action, driverAction });
  });

  it('reads no recovery action from a message without one; other XIDs ignore the message', () => {
    expect(parseRecoveryAction('something odd happened')).toBeUndefined();
    expect(classifyXid(154, 'something odd happened').action).toBe('CONTACT_SUPPORT');
    expect(classifyXid(13, 'to 0x2 (Node Reboot Required)').action).toBe('RESTART_APP');
    expect(classifyXid(154, 'to 0x63 (from a newer driver)').action).toBe('CONTACT_SUPPORT');
  });

  it.each<[XidAction, boolean]>([
    ['IGNORE', false],
    ['RESTART_APP', false],
    ['RESET_GPU', true],
    ['RESTART_BM', true],
    ['CHECK_MECHANICALS', true],
    ['CONTACT_SUPPORT', true],
  ])('%s takes the GPU out of service: %s', (action, unhealthy) => {
    expect(actionMakesGpuUnhealthy(action)).toBe(unhealthy);
  });

  it('describes a class for the timeline', () => {
    expect(describeXidClass(classifyXid(48))).toBe('XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)');
    expect(describeXidClass(classifyXid(154, 'changed from 0x0 (None) to 0x2 (Node Reboot Required)'))).toBe(
      'XID 154: GPU recovery action changed; recommended action: reboot the node (RESTART_BM), as the driver reports (NODE_REBOOT)',
    );
  });

  it.each<[number, string, XidAction]>([
    [79, 'XID 79: GPU has fallen off the bus', 'RESTART_BM'],
    [13, 'XID 13', 'RESTART_APP'],
    [154, 'XID 154: GPU recovery action changed; recommended action: reboot the node (RESTART_BM), as the driver reports (NODE_REBOOT)', 'RESTART_BM'],
    [48, 'XID 48: double-bit ECC error; recommended action: reset the GPU (RESET_GPU)', 'RESET_GPU'],
    [48, 'XID 48; recommended action: whatever (NOT_A_BUCKET)', 'RESET_GPU'],
  ])('the recommended action of a recorded XID %i event: %s', (xid, message, action) => {
    expect(recommendedActionOf(xid, message)).toBe(action);
  });
});
