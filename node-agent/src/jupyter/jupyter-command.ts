// How the agent starts Jupyter in an image that has it but does not run it: which server
// (JupyterLab, the notebook, or a bare Jupyter server), found on the image's PATH, and the
// command line that makes it serve the proxy: all interfaces of the container, port 8888,
// base URL /<instance id>/ (the token comes in the environment). Pure, so every variant is unit-tested.
import { posix } from 'node:path';
import { DEFAULT_PATH, MAX_PATH_ENTRIES } from '../runtime/command-lookup.js';

/** The port Jupyter listens on inside the container (the agent's, or the image's own). */
export const JUPYTER_CONTAINER_PORT = 8888;

/** In order of preference: what a user of a GPU cloud expects to open first. */
export const JUPYTER_PROGRAMS = ['jupyter-lab', 'jupyter-notebook', 'jupyter-server'] as const;
export type JupyterProgram = (typeof JUPYTER_PROGRAMS)[number];

export const jupyterBaseUrl = (instanceId: string): string => `/${instanceId}/`;

/** Every place a program may be on the image's PATH, in PATH order. */
export function candidatePaths(pathVariable: string | undefined, program: string): string[] {
  return (pathVariable || DEFAULT_PATH)
    .split(':', MAX_PATH_ENTRIES)
    .filter((dir) => dir.startsWith('/'))
    .map((dir) => posix.join(dir, program));
}

/** The notebook's major version from `jupyter-notebook --version` output ("6.4.12"). */
export function notebookMajor(output: string): number | undefined {
  const match = /(\d+)\.\d+/.exec(output);
  return match ? Number(match[1]) : undefined;
}

export interface JupyterLaunch {
  program: JupyterProgram;
  /** Absolute path of the program in the image. */
  path: string;
  /** Notebook < 7 is the classic server (NotebookApp options); everything else is jupyter_server (ServerApp). */
  classic: boolean;
}

/** The token is not on the command line (the host's `ps` would show it): Jupyter reads JUPYTER_TOKEN from the exec's environment. */
export function jupyterCommand(launch: JupyterLaunch, options: { baseUrl: string; port?: number }): string[] {
  const app = launch.classic ? 'NotebookApp' : 'ServerApp';
  return [
    launch.path,
    '--no-browser',
    '--allow-root',
    '--ip=0.0.0.0',
    `--port=${options.port ?? JUPYTER_CONTAINER_PORT}`,
    '--port-retries=0',
    `--${app}.base_url=${options.baseUrl}`,
    // Users reach it through the node's public name, not the container's address.
    `--${app}.allow_remote_access=True`,
  ];
}

/** A process listing line that is a Jupyter server (the image's own, or one the agent started earlier). */
export function isJupyterProcess(command: string): boolean {
  return /(^|[\s/])jupyter(-lab|-notebook|-server|\s+(lab|notebook|server))\b/.test(command) || /-m\s+(jupyterlab|notebook|jupyter_server)\b/.test(command);
}
