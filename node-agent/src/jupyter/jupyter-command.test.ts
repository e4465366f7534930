import { describe, expect, it } from 'vitest';
import { envValue } from '../runtime/command-lookup.js';
import { candidatePaths, isJupyterProcess, jupyterBaseUrl, jupyterCommand, notebookMajor } from './jupyter-command.js';

describe('starting Jupyter in an image', () => {
  it('looks for the programs along the image PATH', () => {
    expect(candidatePaths('/opt/conda/bin:/usr/bin:relative', 'jupyter-lab')).toEqual(['/opt/conda/bin/jupyter-lab', '/usr/bin/jupyter-lab']);
    expect(candidatePaths(undefined, 'jupyter-server')[0]).toBe('/usr/local/sbin/jupyter-server');
    expect(envValue(['A=1', 'PATH=/a:/b', 'PATH=/c'], 'PATH')).toBe('/c');
    expect(envValue(['A=1'], 'PATH')).toBeUndefined();
  });

  it("looks at no more than the PATH's first 32 entries: each is a request to the engine", () => {
    const path = Array.from({ length: 100_000 }, (_, i) => `/d${i}`).join(':');
    expect(candidatePaths(path, 'jupyter-lab')).toEqual(Array.from({ length: 32 }, (_, i) => `/d${i}/jupyter-lab`));
  });

  it('tells the classic notebook from the jupyter_server one', () => {
    expect(notebookMajor('6.4.12\n')).toBe(6);
    expect(notebookMajor('7.2.1')).toBe(7);
    expect(notebookMajor('')).toBeUndefined();
  });

  it('serves the proxy: all interfaces, port 8888, the instance base URL; no token on the command line', () => {
    const base = jupyterBaseUrl('inst_x1');
    expect(base).toBe('/inst_x1/');
    expect(jupyterCommand({ program: 'jupyter-notebook', path: '/usr/bin/jupyter-notebook', classic: true }, { baseUrl: base })).toEqual([
      '/usr/bin/jupyter-notebook',
      '--no-browser',
      '--allow-root',
      '--ip=0.0.0.0',
      '--port=8888',
      '--port-retries=0',
      '--NotebookApp.base_url=/inst_x1/',
      '--NotebookApp.allow_remote_access=True',
    ]);
    expect(jupyterCommand({ program: 'jupyter-lab', path: '/opt/conda/bin/jupyter-lab', classic: false }, { baseUrl: base })).toContain('--ServerApp.base_url=/inst_x1/');
  });

  it('recognises Jupyter servers in a process listing', () => {
    expect(isJupyterProcess('/usr/bin/python3 /usr/bin/jupyter-notebook --no-browser')).toBe(true);
    expect(isJupyterProcess('/opt/conda/bin/python /opt/conda/bin/jupyter-lab --ip=0.0.0.0')).toBe(true);
    expect(isJupyterProcess('jupyter lab --allow-root')).toBe(true);
    expect(isJupyterProcess('python -m jupyterlab')).toBe(true);
    expect(isJupyterProcess('sh -c trap "echo bye" TERM; sleep 1')).toBe(false);
    expect(isJupyterProcess('python -m ipykernel_launcher -f /root/.local/share/jupyter/runtime/kernel-1.json')).toBe(false);
  });
});
