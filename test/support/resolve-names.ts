// Run as a child (its own mount namespace, its own /etc/resolv.conf): takes each host
// given, all at once, the way a tenant's name is taken, and prints a JSON line as each
// settles: {"host", "result", "ms"}. `registry`: the node agent resolving an image's
// registry (the addresses); `webhook`: the control plane checking a webhook URL on the
// host (null when allowed, else why not).
import { addressesOf } from '../../node-agent/src/runtime/image-registry.js';
import { buildTargetPolicy, refusedUrl, webhookResolver } from '../../control-plane/src/webhooks/target-policy.js';

const [mode, ...hosts] = process.argv.slice(2);
const policy = buildTargetPolicy('production', []);
const take = (host: string): Promise<unknown> =>
  mode === 'webhook' ? refusedUrl(`https://${host}/hooks`, policy, webhookResolver(policy)) : addressesOf(host, { allowed: [] });

const started = performance.now();
await Promise.all(
  hosts.map(async (host) => {
    const result = await take(host);
    process.stdout.write(`${JSON.stringify({ host, result, ms: Math.round(performance.now() - started) })}\n`);
  }),
);
