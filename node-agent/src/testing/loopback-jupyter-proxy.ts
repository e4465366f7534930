// A Jupyter proxy for tests: on loopback, with a free port per instance and no public URL;
// the caller picks the registry, the connection limits and anything else it varies.
import { createLogger } from '@svc/shared';
import { JupyterProxy, type JupyterProxyOptions } from '../jupyter/jupyter-proxy.js';

export function loopbackJupyterProxy(options: Pick<JupyterProxyOptions, 'registry' | 'limits'> & Partial<JupyterProxyOptions>): JupyterProxy {
  return new JupyterProxy({
    log: createLogger('silent', 'test'),
    host: '127.0.0.1',
    ports: { first: 0, count: 1 },
    publicUrl: '',
    publicHost: '127.0.0.1',
    ...options,
  });
}
