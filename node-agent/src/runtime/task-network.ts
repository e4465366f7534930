// Every task container gets a Docker bridge network of its own, so no two tenants (and no
// tenant and a model-server replica) share a link: Docker isolates bridges from each other.
// The bridge interface is named by kind (svci-… for instances, svcr-… for replicas) so the
// host firewall (firewall-rules.ts) can match every instance's traffic with one wildcard
// and keep it away from the host, the replicas and private ranges. Networks carry the
// task and node labels, so a restarted agent keeps those of running tasks and sweeps the rest.
import { createHash } from 'node:crypto';
import type { NetworkCreateOptions } from 'dockerode';
import { LABEL_INSTANCE, LABEL_NODE, LABEL_REPLICA, type TaskSpec } from './container-spec.js';

/** Interface name prefixes; firewall rules match `<prefix>+`. */
export const INSTANCE_BRIDGE_PREFIX = 'svci';
export const REPLICA_BRIDGE_PREFIX = 'svcr';

/** `internet`: instances may open connections to public addresses; `none`: a Docker internal network. */
export type InstanceOutbound = 'internet' | 'none';

type TaskRef = Pick<TaskSpec, 'kind' | 'taskId'>;

export const networkName = (task: TaskRef): string => `svc-net-${task.kind}-${task.taskId}`;

/** Linux caps interface names at 15 characters: the prefix, a dash and 10 hex digits of the task id's hash. */
export function bridgeName(task: TaskRef): string {
  const prefix = task.kind === 'instance' ? INSTANCE_BRIDGE_PREFIX : REPLICA_BRIDGE_PREFIX;
  return `${prefix}-${createHash('sha256').update(task.taskId).digest('hex').slice(0, 10)}`;
}

export function buildNetworkSpec(task: TaskRef, nodeId: string, outbound: InstanceOutbound): NetworkCreateOptions {
  return {
    Name: networkName(task),
    Driver: 'bridge',
    CheckDuplicate: true,
    // Replicas download weights, so they always keep outbound; instances follow the setting.
    Internal: task.kind === 'instance' && outbound === 'none',
    EnableIPv6: false,
    Labels: { [task.kind === 'instance' ? LABEL_INSTANCE : LABEL_REPLICA]: task.taskId, [LABEL_NODE]: nodeId },
    Options: {
      'com.docker.network.bridge.name': bridgeName(task),
      // One container per network: nothing on the bridge to talk to besides the gateway.
      'com.docker.network.bridge.enable_icc': 'false',
    },
  };
}
