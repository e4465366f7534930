// Starts the remediation loop with the server (when the store keeps remediation state and
// SVC_REMEDIATION is on) while this process leads (leadership.ts: two replicas would both
// act on a new fault), and stops it when it stops leading or the server closes.
import type { FastifyInstance } from 'fastify';
import type { Clock } from '@svc/shared';
import type { ControlPlaneConfig } from '../config.js';
import type { Store } from '../store/store.js';
import { soleLeader, whileLeading, type Leadership } from '../leadership.js';
import { parseActionOverrides } from './remediation-policy.js';
import { Remediator } from './remediator.js';

export function installRemediation(
  app: FastifyInstance,
  deps: { config: ControlPlaneConfig; store: Store; clock: Clock; leadership?: Leadership },
): Remediator | undefined {
  const { config, store, clock } = deps;
  const log = app.log.child({ component: 'remediation' });
  if (!config.remediation) return undefined;
  if (!store.remediations) {
    log.warn('this store keeps no remediation state: GPU faults are recorded but not acted on');
    return undefined;
  }
  const remediator = new Remediator({
    nodes: store.nodes,
    instances: store.instances,
    remediations: store.remediations,
    clock,
    policy: { kindByAction: parseActionOverrides(config.remediationActions), autoReset: config.remediationAutoReset },
    log,
  });
  const stop = whileLeading(deps.leadership ?? soleLeader, () => remediator.start(config.remediationTickMs), () => remediator.stop(), (err) =>
    log.error({ err }, 'starting or stopping remediation with leadership failed'),
  );
  app.addHook('onClose', async () => stop());
  return remediator;
}
