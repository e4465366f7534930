// The settings of an agent that talks to a fake control plane and nothing else: a fresh
// data dir, no GPUs (no NVML), SSH and Jupyter on free ports, on loopback. Several such
// agents can run at once in one test process.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export function protocolOnlyAgentEnv(env: Record<string, string>): Record<string, string> {
  return {
    SVC_NODE_TOKEN: 'good-token',
    SVC_AGENT_DATA_DIR: mkdtempSync(join(tmpdir(), 'agent-')),
    SVC_NVML_LIBRARY: '/nonexistent/libnvidia-ml.so.1',
    SVC_HOST_FIREWALL: 'false',
    SVC_SSH_PORT: '0',
    SVC_JUPYTER_PORT: '0',
    SVC_PULL_PROXY_PORT: '0',
    SVC_ACCESS_BIND_HOST: '127.0.0.1',
    // Only at a full disk: a CI machine's may be 90% full without that being the test.
    SVC_DISK_PRESSURE_PERCENT: '100',
    ...env,
  };
}
