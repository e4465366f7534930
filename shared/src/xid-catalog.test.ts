import { describe, expect, it } from 'vitest';
import { actionMakesGpuUnhealthy, classifyXid, describeXidClass, parseRecoveryAction, recommendedActionOf, type XidAction } from './xid-catalog.js';

describe('classifyXid', () => {
  it.each<[number, XidAction, string]>([
    [13, 'RESTART_APP', 'graphics engine exception'],
    [31, 'RESTART_APP', 'GPU memory page fault'],
    [43, 'RESTART_APP', 'GPU stopped processing'],
    [94, 'RESTART_APP', 'contained ECC error'],
    [45, 'IGNORE', 'preemptive cleanup, due to previous errors'],
    [48, 'RESET_GPU', 'double-bit ECC error'],
    [63, 'RESET_GPU', 'ECC page retirement or row remapping recording event'],
    [74, 'RESET_GPU', 'NVLink error'],
    [95, 'RESET_GPU', 'uncontained ECC error'],
    [119, 'RESET_GPU', 'GSP RPC timeout'],
    [79, 'RESTART_BM', 'GPU has fallen off the bus'],
    [54, 'CHECK_MECHANICALS', 'auxiliary power is not connected to the GPU board'],
    [92, 'CONTACT_SUPPORT', 'high single-bit ECC error rate'],
    [154, 'CONTACT_SUPPORT', 'GPU recovery action changed'],
    [250, 'CONTACT_SUPPORT', 'unknown XID'],
    [0, 'CONTACT_SUPPORT', 'unknown XID'],
  ])('XID %i is %s (%s)', (xid, action, meaning) => {
    expect(classifyXid(xid)).toEqual({ xid, action, meaning });
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
