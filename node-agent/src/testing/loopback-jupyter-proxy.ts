// A Jupyter proxy for tests: on loopback, with a free port per instance and no public URL;
// the caller picks the registry, the connection limits and anything else it varies.
import { createLogger } from '@svc/shared';
import type { AccessEntry } from '../access/access-registry.js';
import { JupyterProxy, type JupyterProxyOptions } from '../jupyter/jupyter-proxy.js';

export function loopbackJupyterProxy(options: Pick<JupyterProxyOptions, 'registry' | 'limits'> & Partial<JupyterProxyOptions>): JupyterProxy {
  return new JupyterProxy({
    log: createLogger('silent', 'test'),
    host: '127.0.0.1',
    ports: { first: 0, count: 1 },
    publicUrl: '',
    publicHost: '127.0.0.1',
    nodeMbps: 500,
    ...options,
  });
}

/** An instance whose "Jupyter" is a test server on loopback `port`; its token is `token-<id>` unless given. */
export function loopbackJupyterEntry(instanceId: string, port: number, overrides: Partial<AccessEntry> = {}): AccessEntry {
  return {
    instanceId,
    containerId: `c-${instanceId}`,
    containerIp: '127.0.0.1',
    keys: [],
    home: '/root',
    jupyterToken: `token-${instanceId}`,
    jupyter: { port, baseUrl: `/${instanceId}/` },
    jupyterUnavailableReason: null,
    networkMbps: null,
    ...overrides,
  };
}
