import { describe, expect, it } from 'vitest';
import { ConfigError } from '@svc/shared';
import { loadAgentConfig } from './agent-config.js';

describe('loadAgentConfig', () => {
  it('has working defaults for a local agent', () => {
    const config = loadAgentConfig({});
    expect(config).toMatchObject({ controlPlane: '127.0.0.1:7070', pool: 'na', dataDir: './data/agent', useTls: false, simulation: undefined });
    expect([...config.ignoredXidSet]).toEqual([13, 31, 43, 45, 68, 109]);
    expect(config.nodeName).not.toBe('');
  });

  it('refuses plaintext to a control plane off loopback, with what to do', () => {
    expect(() => loadAgentConfig({ SVC_CONTROL_PLANE: 'cp.example.com:7070' })).toThrow(ConfigError);
    expect(() => loadAgentConfig({ SVC_CONTROL_PLANE: 'cp.example.com:7070' })).toThrow(/plaintext is allowed only to a loopback.*SVC_AGENT_TLS_CA/);
    expect(loadAgentConfig({ SVC_CONTROL_PLANE: 'cp.example.com:7070', SVC_AGENT_TLS_CA: '/etc/svc/ca.pem' }).useTls).toBe(true);
    expect(loadAgentConfig({ SVC_CONTROL_PLANE: 'cp.example.com:7070', SVC_AGENT_TLS: 'true' }).useTls).toBe(true);
  });

  it('reads several control-plane addresses, each held to the plaintext rule', () => {
    expect(loadAgentConfig({ SVC_CONTROL_PLANE: '127.0.0.1:7070, 127.0.0.1:7071' }).controlPlanes).toEqual(['127.0.0.1:7070', '127.0.0.1:7071']);
    expect(loadAgentConfig({}).controlPlanes).toEqual(['127.0.0.1:7070']);
    expect(() => loadAgentConfig({ SVC_CONTROL_PLANE: '127.0.0.1:7070,cp2.example.com:7070' })).toThrow(/refusing plaintext gRPC to cp2.example.com:7070/);
    expect(loadAgentConfig({ SVC_CONTROL_PLANE: 'cp1.example.com:7070,cp2.example.com:7070', SVC_AGENT_TLS: 'true' }).controlPlanes).toHaveLength(2);
    expect(() => loadAgentConfig({ SVC_CONTROL_PLANE: '127.0.0.1:7070,,127.0.0.1:7071' })).toThrow(ConfigError);
  });

  it('wants a client certificate and key together', () => {
    expect(() => loadAgentConfig({ SVC_AGENT_TLS_CERT: '/c.pem' })).toThrow(/go together/);
    expect(loadAgentConfig({ SVC_AGENT_TLS_CERT: '/c.pem', SVC_AGENT_TLS_KEY: '/k.pem' }).useTls).toBe(true);
  });

  it('wants the image collection low mark at or below the high mark', () => {
    expect(() => loadAgentConfig({ SVC_IMAGE_GC_HIGH_PERCENT: '70', SVC_IMAGE_GC_LOW_PERCENT: '80' })).toThrow(/SVC_IMAGE_GC_LOW_PERCENT 80 is above SVC_IMAGE_GC_HIGH_PERCENT 70/);
    expect(loadAgentConfig({})).toMatchObject({ imageGcHighPercent: 85, imageGcLowPercent: 80 });
  });

  it('keeps the Jupyter range inside the port space and origins per instance', () => {
    expect(() => loadAgentConfig({ SVC_JUPYTER_PORT: '65500', SVC_JUPYTER_PORT_COUNT: '100' })).toThrow(/SVC_JUPYTER_PORT 65500 plus SVC_JUPYTER_PORT_COUNT 100/);
    expect(loadAgentConfig({ SVC_JUPYTER_PORT: '65436', SVC_JUPYTER_PORT_COUNT: '100' }).jupyterPortCount).toBe(100);
    expect(loadAgentConfig({ SVC_JUPYTER_PORT: '0' }).jupyterPort).toBe(0);
    expect(loadAgentConfig({ SVC_JUPYTER_PUBLIC_URL: 'https://j{port}.node7.example.com' }).jupyterPublicUrl).toBe('https://j{port}.node7.example.com');
  });

  it('parses the ignored XIDs and the simulated GPUs', () => {
    const config = loadAgentConfig({ SVC_GPU_IGNORED_XIDS: '13, 79', SVC_SIMULATE_GPUS: '4xNVIDIA A100-SXM4-80GB' });
    expect([...config.ignoredXidSet]).toEqual([13, 79]);
    expect(config.simulation).toEqual({ count: 4, name: 'NVIDIA A100-SXM4-80GB' });
    expect(loadAgentConfig({ SVC_SIMULATE_GPUS: '2' }).simulation).toEqual({ count: 2, name: undefined });
  });

  it('reads the isolation settings: outbound, allowed private CIDRs, reserves and the pids limit', () => {
    const config = loadAgentConfig({ SVC_INSTANCE_OUTBOUND: 'none', SVC_INSTANCE_ALLOW_CIDRS: '10.0.0.2, 192.168.7.0/24', SVC_HOST_RESERVED_CPUS: '0.5', SVC_TASK_PIDS_LIMIT: '512' });
    expect(config).toMatchObject({ instanceOutbound: 'none', instanceAllowCidrList: ['10.0.0.2', '192.168.7.0/24'], reservedCpus: 0.5, taskPidsLimit: 512, hostFirewall: true });
    expect(loadAgentConfig({})).toMatchObject({ instanceOutbound: 'internet', instanceAllowCidrList: [], reservedMemoryMib: 2048 });
  });

  it('reads the private registries instances may pull from: none by default', () => {
    expect(loadAgentConfig({}).instancePrivateRegistryList).toEqual([]);
    expect(loadAgentConfig({ SVC_INSTANCE_PRIVATE_REGISTRIES: '127.0.0.1:5000, Mirror.Internal, [fd00::5]:5000' }).instancePrivateRegistryList).toEqual(['127.0.0.1:5000', 'mirror.internal', '[fd00::5]:5000']);
  });

  it("reads the registries of the node's own images, none by default, and refuses one listed for instances too", () => {
    expect(loadAgentConfig({}).replicaRegistryList).toEqual([]);
    expect(loadAgentConfig({ SVC_REPLICA_REGISTRIES: 'Models.Internal:5000, 10.0.0.5' }).replicaRegistryList).toEqual(['models.internal:5000', '10.0.0.5']);
    expect(() => loadAgentConfig({ SVC_REPLICA_REGISTRIES: 'models.internal', SVC_INSTANCE_PRIVATE_REGISTRIES: 'mirror.internal, Models.Internal' })).toThrow(
      'models.internal is in both SVC_INSTANCE_PRIVATE_REGISTRIES and SVC_REPLICA_REGISTRIES',
    );
  });

  it('blocks SMTP by default, reads other blocked ports, and blocks none with none', () => {
    expect(loadAgentConfig({}).instanceBlockedPortList).toEqual([{ protocol: 'tcp', from: 25, to: 25 }]);
    expect(loadAgentConfig({ SVC_INSTANCE_BLOCKED_PORTS: 'tcp:25, udp:1900' }).instanceBlockedPortList).toEqual([
      { protocol: 'tcp', from: 25, to: 25 },
      { protocol: 'udp', from: 1900, to: 1900 },
    ]);
    expect(loadAgentConfig({ SVC_INSTANCE_BLOCKED_PORTS: 'none' }).instanceBlockedPortList).toEqual([]);
  });

  it('reads the SSH penalties: words override the defaults, off turns them off, exempt addresses', () => {
    const config = loadAgentConfig({ SVC_SSH_SOURCE_PENALTIES: 'authfail:5s min:30s', SVC_SSH_PENALTY_EXEMPT: '192.0.2.10, 2001:db8::/32' });
    expect(config.sshPenalties).toEqual({
      durations: { noauth: 1_000, authfail: 5_000, 'grace-exceeded': 10_000 },
      minMs: 30_000,
      maxMs: 600_000,
      maxSources: 65_536,
      exempt: ['192.0.2.10', '2001:db8::/32'],
    });
    expect(loadAgentConfig({ SVC_SSH_SOURCE_PENALTIES: 'off' }).sshPenalties).toBeNull();
  });

  it.each([
    ['SVC_INSTANCE_OUTBOUND', 'sometimes'],
    ['SVC_INSTANCE_ALLOW_CIDRS', '10.0.0.0/8 -j ACCEPT'],
    ['SVC_INSTANCE_BLOCKED_PORTS', 'tcp:25 -j ACCEPT'],
    ['SVC_INSTANCE_BLOCKED_PORTS', 'tcp:0'],
    ['SVC_INSTANCE_PRIVATE_REGISTRIES', 'http://127.0.0.1:5000'],
    ['SVC_INSTANCE_PRIVATE_REGISTRIES', 'mirror.internal/team'],
    ['SVC_REPLICA_REGISTRIES', 'https://models.internal'],
    ['SVC_TASK_PIDS_LIMIT', '1'],
    ['SVC_HOST_RESERVED_CPUS', '-1'],
    ['SVC_POOL', 'mars'],
    ['SVC_GPU_IGNORED_XIDS', '13;31'],
    ['SVC_SIMULATE_GPUS', '9'],
    ['SVC_SIMULATE_GPUS', 'lots'],
    ['SVC_GPU_MAX_TEMPERATURE_C', 'hot'],
    // One origin for every instance would let tenants script each other's notebooks.
    ['SVC_JUPYTER_PUBLIC_URL', 'https://jupyter.node7.example.com'],
    ['SVC_JUPYTER_PORT_COUNT', '0'],
    ['SVC_AGENT_KEEPALIVE_MS', '10'],
    ['SVC_AGENT_RECONNECT_MAX_MS', 'soon'],
    ['SVC_CONTROL_PLANE', '127.0.0.1'],
    ['SVC_SSH_SOURCE_PENALTIES', 'crash:90s'],
    ['SVC_SSH_SOURCE_PENALTIES', 'noauth:soon'],
    ['SVC_SSH_PENALTY_EXEMPT', '10.0.0.0/33'],
    ['SVC_SSH_PENALTY_EXEMPT', 'monitoring.example'],
  ])('stops on a bad %s (%s) naming the setting', (name, value) => {
    expect(() => loadAgentConfig({ [name]: value })).toThrow(new RegExp(name));
  });
});
