// What a host's set-up leaves weaker in keeping tenants apart, as codes the agent reports
// in its host facts (HostFacts.isolation_warnings) beside the warning it logs at start, so
// an operator with hundreds of nodes finds them from the control plane (`svcctl nodes
// show`, the operators' svc_node_isolation_warning series) instead of in each node's log.
export type IsolationWarning =
  /** dockerd fetches images around the agent's pull proxy (its HTTP(S)_PROXY, or a NO_PROXY). */
  | 'pulls_bypass_proxy'
  /** SVC_HOST_FIREWALL=false: nothing here keeps containers from the host and each other. */
  | 'no_host_firewall'
  /** cgroup v1: background writes are charged to no container. */
  | 'cgroup_v1'
  /** SVC_TASK_LOG_BYTES_PER_SECOND=0: Docker copies whatever an instance prints. */
  | 'no_log_limit'
  /** SVC_CONTAINER_CORE_DUMPS=false with a core_pattern that runs a program on the host. */
  | 'core_dumps_to_host'
  /** containerd's RLIMIT_SIGPENDING/MSGQUEUE could not be made unlimited: instances can starve each other's (shared-rlimits.ts). */
  | 'shared_rlimits';
