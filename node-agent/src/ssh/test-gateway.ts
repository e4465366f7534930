// An SSH gateway in the test's own process, on 127.0.0.1, with the agent's default limits
// and no penalties (the tests open many connections that never log in), and at most one
// instance that `user` can log in to.
import Docker from 'dockerode';
import { createLogger } from '@svc/shared';
import { AccessRegistry } from '../access/access-registry.js';
import { sshLimitsOf } from '../access/start-access.js';
import { loadAgentConfig } from '../config/agent-config.js';
import { parseAuthorizedKeys } from './authorized-keys.js';
import { generateEd25519OpenSsh, hostKeyFrom } from './host-key.js';
import { SshGateway, type SshLimits } from './ssh-gateway.js';

export interface TestGateway {
  gateway: SshGateway;
  port: number;
  /** The key that logs in to the instance, if there is one. */
  user: { privateKey: string };
  /** What the agent's task reports drive: drain (stopping) and remove (gone). */
  registry: AccessRegistry;
}

export async function startTestGateway(options: { instance?: { instanceId: string; containerId: string }; docker?: Docker; limits?: Partial<SshLimits> } = {}): Promise<TestGateway> {
  const user = generateEd25519OpenSsh();
  const registry = new AccessRegistry();
  if (options.instance) {
    registry.register({
      ...options.instance,
      containerIp: null,
      keys: parseAuthorizedKeys([`ssh-ed25519 ${user.publicBlob.toString('base64')}`]).keys,
      home: '/root',
      jupyterToken: 'unused',
      jupyter: null,
      jupyterUnavailableReason: null,
      networkMbps: null,
    });
  }
  const gateway = new SshGateway({
    registry,
    docker: options.docker ?? new Docker(),
    hostKey: hostKeyFrom(generateEd25519OpenSsh().privateKey, 'test'),
    log: createLogger('silent', 'ssh-gateway-test'),
    host: '127.0.0.1',
    port: 0,
    limits: { ...sshLimitsOf(loadAgentConfig({})), penalties: null, ...options.limits },
  });
  return { gateway, port: await gateway.listen(), user, registry };
}
