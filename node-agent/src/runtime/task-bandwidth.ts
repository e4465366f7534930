// An instance's network bandwidth, each way, shaped with a token bucket filter (`tc tbf`),
// as Kubernetes' bandwidth plugin does for a pod. Without it one tenant downloading or
// serving at line rate takes its node's link from every other tenant on it.
//   - To the instance: on its bridge (task-network.ts gives every task one of its own, with
//     nothing else on it), so every packet the host sends or forwards to the container
//     passes the bucket. Set before the container starts.
//   - From the instance: on the container's own eth0, inside its network namespace, set
//     right after it starts (the namespace exists from then on).
// The tenant is root in its container but holds no CAP_NET_ADMIN (container-spec.ts), so
// it can read both settings (`tc qdisc show`) and change neither. Replicas, the provider's
// own model servers, are not shaped: they download weights.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** The container's only interface: Docker names it so on a task's own network. */
export const CONTAINER_INTERFACE = 'eth0';
/** Most a packet waits in the bucket's queue before the bucket drops it (TCP then slows down). */
const LATENCY = '50ms';
/** The bucket holds this long at the rate, and at least one 64 KiB segmentation-offload packet. */
const BURST_SECONDS = 0.01;
const MIN_BURST_BYTES = 64 * 1024;

/** `tc` arguments that shape what `device` sends to `mbps` Mbit/s (replacing whatever it had). */
export function tbfArgs(device: string, mbps: number): string[] {
  const bytesPerSecond = mbps * 125_000;
  const burst = Math.max(MIN_BURST_BYTES, Math.ceil(bytesPerSecond * BURST_SECONDS));
  return ['qdisc', 'replace', 'dev', device, 'root', 'tbf', 'rate', `${mbps}mbit`, 'burst', String(burst), 'latency', LATENCY];
}

export class BandwidthError extends Error {
  override readonly name = 'BandwidthError';
}

/** What is sent to the container: its bridge's queue, on the host. */
export async function shapeToContainer(bridge: string, mbps: number): Promise<void> {
  await tc([], tbfArgs(bridge, mbps));
}

/** What the container sends: its own interface's queue, entered through its network namespace (`pid` is its process on the host). */
export async function shapeFromContainer(pid: number, mbps: number): Promise<void> {
  if (!Number.isInteger(pid) || pid <= 0) throw new BandwidthError(`cannot shape the container's link: it has no process (pid ${pid})`);
  await tc(['nsenter', `--target=${pid}`, '--net', '--'], tbfArgs(CONTAINER_INTERFACE, mbps));
}

async function tc(prefix: string[], args: string[]): Promise<void> {
  const [command, ...rest] = [...prefix, 'tc', ...args];
  try {
    await run(command!, rest);
  } catch (err) {
    const detail = (err as { stderr?: string }).stderr?.trim() || (err as Error).message;
    throw new BandwidthError(`${[command, ...rest].join(' ')} failed: ${detail}`, { cause: err });
  }
}
