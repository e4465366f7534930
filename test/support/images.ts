// The one place that names the test images. scripts/setup-host.sh reads the
// names from this file, so keep the `export const X = '...'` form.
import Docker from 'dockerode';

export const REGISTRY = '127.0.0.1:5000';
export const BUSYBOX_IMAGE = '127.0.0.1:5000/svc/busybox:1';
/** Busybox whose default command runs until SIGTERM, then exits 0 (a well-behaved workload). */
export const SLEEPER_IMAGE = '127.0.0.1:5000/svc/sleeper:1';
/** Busybox whose default command ignores SIGTERM: only SIGKILL ends it. */
export const STUBBORN_IMAGE = '127.0.0.1:5000/svc/stubborn:1';
/** Busybox whose default command, `serve`, is not in the image. */
export const MISSING_COMMAND_IMAGE = '127.0.0.1:5000/svc/missing-command:1';
/**
 * A stand-in model server (busybox httpd on port 8000): /health answers 200 a second
 * after start, /args holds the arguments it was started with, /v1/models answers.
 */
export const MODEL_SERVER_STANDIN_IMAGE = '127.0.0.1:5000/svc/model-server-standin:1';
/**
 * The project's CPU model server (cpu-engine/): node-llama-cpp behind an
 * OpenAI-compatible API, with the tiny test models in /models. Built by
 * cpu-engine/image/build-image.sh from scripts/setup-host.sh.
 */
export const CPU_ENGINE_IMAGE = '127.0.0.1:5000/svc/cpu-engine:3';
/** Busybox whose command looks like a Jupyter server in a process listing but never serves (the agent's start bound). */
export const JUPYTER_SILENT_IMAGE = '127.0.0.1:5000/svc/jupyter-silent:1';
/** The sleeper with a `jupyter-notebook` that prints without end and another that never ends, first and later on its PATH. */
export const JUPYTER_HANG_IMAGE = '127.0.0.1:5000/svc/jupyter-hang:1';
/** Debian's Jupyter notebook (python3, ipykernel) plus busybox's sh; its command only waits: the agent starts Jupyter. */
export const JUPYTER_IMAGE = '127.0.0.1:5000/svc/jupyter:1';
/** The Jupyter image running its own notebook server, configured from SVC_JUPYTER_BASE_URL / JUPYTER_TOKEN. */
export const JUPYTER_SELF_IMAGE = '127.0.0.1:5000/svc/jupyter-self:1';

/** True when a Docker engine answers on the default socket. */
export async function dockerAvailable(docker: Docker = new Docker()): Promise<boolean> {
  try {
    await docker.ping();
    return true;
  } catch {
    return false;
  }
}
