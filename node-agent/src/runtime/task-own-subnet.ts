// Nothing an instance sends to its own subnet but what goes to its gateway. The kernel's
// neighbour (ARP) table is one per host, shared by every network namespace, and holds
// 1,024 entries by default (net.ipv4.neigh.default.gc_thresh3). A container asks for a
// neighbour entry for every address of its subnet it sends to, and each one that never
// answers stays for seconds: measured, a container without any capability connecting in
// a loop to the addresses of its /16 (Docker's default pools hand out /16s) held all
// 1,024, the kernel logged "neighbor table overflow", and one in ten of the host's
// connections to a newly started container failed (Jupyter, `ssh -L` forwards and replica
// health checks go that way). Raising the table is no answer: each unanswered entry also queues what was sent
// to it, in kernel memory no container is charged for (the same loop with the table at a
// million held 65,532 entries and 850 MiB).
//
// Every task is alone on its network (task-network.ts): on its subnet there is nobody but
// itself and its gateway, so refusing everything else takes nothing from it. The rule sits
// in OUTPUT, which the kernel runs before it looks for a neighbour, in the container's own
// namespace (task-namespace-filter.ts), where the tenant, root without CAP_NET_ADMIN,
// can read it and not change it. Its own address goes over loopback and is not matched.
import { CONTAINER_INTERFACE } from './task-bandwidth.js';

/** The container's place on its network, as Docker reports it. */
export interface OwnNetwork {
  address: string;
  prefixLength: number;
  /** null: none reported, and nothing on the subnet is let through. */
  gateway: string | null;
}

/**
 * OUTPUT rules letting the gateway through and refusing at once (a reset, or ICMP) what
 * else the container sends to its subnet.
 */
export function ownSubnetRules(network: OwnNetwork): string[] {
  const onLink = `-A OUTPUT -o ${CONTAINER_INTERFACE}`;
  const subnet = `${network.address}/${network.prefixLength}`;
  return [
    ...(network.gateway ? [`${onLink} -d ${network.gateway}/32 -j ACCEPT`] : []),
    `${onLink} -d ${subnet} -p tcp -j REJECT --reject-with tcp-reset`,
    `${onLink} -d ${subnet} -j REJECT`,
  ];
}
