// Gets a Jupyter server going in an instance, when one can be had: an image that runs
// Jupyter itself is left to it (it serves port 8888 with the base URL and token from
// SVC_JUPYTER_BASE_URL / JUPYTER_TOKEN, docs/ssh-jupyter.md); an image that has Jupyter
// but does not run it gets one started by the agent (a detached exec, so it outlives
// agent restarts); any other image has no Jupyter, and the reason says why.
import { request } from 'node:http';
import type Docker from 'dockerode';
import type { Logger } from '@svc/shared';
import { ContainerProcess } from '../access/container-process.js';
import { envValue } from '../runtime/command-lookup.js';
import {
  candidatePaths,
  isJupyterProcess,
  JUPYTER_CONTAINER_PORT,
  JUPYTER_PROGRAMS,
  jupyterCommand,
  notebookMajor,
  type JupyterLaunch,
} from './jupyter-command.js';

export type JupyterOutcome =
  | { ok: true; port: number; baseUrl: string; startedBy: 'image' | 'agent' }
  | { ok: false; reason: string };

export interface LaunchRequest {
  containerId: string;
  containerIp: string | null;
  token: string;
  baseUrl: string;
  /** The user's home directory, where an agent-started Jupyter opens. */
  home: string;
}

export interface LauncherOptions {
  docker: Docker;
  log: Logger;
  /** How long a started Jupyter has to answer (default 60 s). */
  startTimeoutMs?: number;
}

const VERSION_TIMEOUT_MS = 10_000;

export class JupyterLauncher {
  constructor(private readonly options: LauncherOptions) {}

  async ensure(req: LaunchRequest): Promise<JupyterOutcome> {
    const { docker, log } = this.options;
    if (!req.containerIp) return { ok: false, reason: 'the instance has no network address for the Jupyter proxy to reach' };
    const container = docker.getContainer(req.containerId);
    if (await this.runsJupyter(req.containerId)) {
      return { ok: true, port: JUPYTER_CONTAINER_PORT, baseUrl: req.baseUrl, startedBy: 'image' };
    }
    const launch = await this.findJupyter(req.containerId);
    if (!launch) {
      return { ok: false, reason: `the image has no Jupyter (none of ${JUPYTER_PROGRAMS.join(', ')} is on its PATH)` };
    }
    const exec = await container.exec({
      Cmd: jupyterCommand(launch, { baseUrl: req.baseUrl }),
      Env: [`JUPYTER_TOKEN=${req.token}`],
      WorkingDir: req.home,
      AttachStdout: false,
      AttachStderr: false,
    });
    await exec.start({ Detach: true });
    log.info({ container: req.containerId, program: launch.path }, 'started Jupyter in the instance');
    const deadline = Date.now() + (this.options.startTimeoutMs ?? 60_000);
    for (;;) {
      if (await answers(req.containerIp, JUPYTER_CONTAINER_PORT, `${req.baseUrl}api`)) {
        return { ok: true, port: JUPYTER_CONTAINER_PORT, baseUrl: req.baseUrl, startedBy: 'agent' };
      }
      const state = (await exec.inspect()) as { Running: boolean; ExitCode: number | null };
      if (!state.Running) return { ok: false, reason: `${launch.program} exited with code ${state.ExitCode} right after the agent started it` };
      if (Date.now() > deadline) return { ok: false, reason: `${launch.program} did not answer on port ${JUPYTER_CONTAINER_PORT} within ${Math.round((this.options.startTimeoutMs ?? 60_000) / 1000)} s` };
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** Whether a Jupyter server runs in the container already (Docker's `top`, i.e. the host's ps). */
  private async runsJupyter(containerId: string): Promise<boolean> {
    let top: { Titles: string[]; Processes: string[][] };
    try {
      top = (await this.options.docker.getContainer(containerId).top({ ps_args: '-eo pid,args' })) as typeof top;
    } catch (err) {
      this.options.log.warn({ err, container: containerId }, 'cannot list the processes of an instance; assuming it runs no Jupyter');
      return false;
    }
    const column = top.Titles.findIndex((t) => t === 'COMMAND' || t === 'CMD');
    return column !== -1 && top.Processes.some((p) => isJupyterProcess(p[column] ?? ''));
  }

  /** The first Jupyter program on the image's PATH, asked through the engine (no shell needed). */
  private async findJupyter(containerId: string): Promise<JupyterLaunch | undefined> {
    const container = this.options.docker.getContainer(containerId);
    const info = await container.inspect();
    const path = envValue(info.Config.Env, 'PATH');
    for (const program of JUPYTER_PROGRAMS) {
      for (const candidate of candidatePaths(path, program)) {
        const exists = await container.infoArchive({ path: candidate }).then(() => true, () => false);
        if (!exists) continue;
        if (program !== 'jupyter-notebook') return { program, path: candidate, classic: false };
        // The image's program: a version takes a second or two to print, not ten.
        const version = await ContainerProcess.run(this.options.docker, containerId, [candidate, '--version'], { timeoutMs: VERSION_TIMEOUT_MS });
        const major = notebookMajor(version.stdout);
        if (version.code !== 0 || major === undefined) continue;
        return { program, path: candidate, classic: major < 7 };
      }
    }
    return undefined;
  }
}

/** Whether an HTTP server answers at host:port/path (any status: Jupyter's /api answers 200). */
function answers(host: string, port: number, path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', timeout: 2_000 }, (res) => {
      res.resume();
      resolve(res.statusCode !== undefined && res.statusCode < 500);
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', () => resolve(false));
    req.end();
  });
}
