// The gateway takes one function per hook; features (instances, replicas) each bring
// their own. This hands every feature each call, in order.
import type { GatewayDeps } from './gateway.js';

export type GatewayHooks = Partial<Pick<GatewayDeps, 'onTaskState' | 'onCommandResult' | 'onNodeConnected' | 'onNodeUnreachable'>>;

export function combineGatewayHooks(...all: GatewayHooks[]): Required<GatewayHooks> {
  const each =
    <K extends keyof GatewayHooks>(name: K) =>
    (...args: Parameters<NonNullable<GatewayHooks[K]>>): void => {
      for (const hooks of all) (hooks[name] as ((...a: typeof args) => void) | undefined)?.(...args);
    };
  return {
    onTaskState: each('onTaskState'),
    onCommandResult: each('onCommandResult'),
    onNodeConnected: each('onNodeConnected'),
    onNodeUnreachable: each('onNodeUnreachable'),
  };
}
