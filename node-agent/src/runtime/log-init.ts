// The log limiter in front of every instance's command (node-agent/log-init/log_init.c):
// what a container prints is copied by the containerd shim and dockerd, outside the
// container's CPU quota, so a tenant printing without end (`yes`) would keep a host core
// busy for free. The limiter runs inside the container, reads the command's output there
// (on the tenant's CPU) and passes on at most a set number of bytes and lines a second.
//
// The agent compiles it at start, statically so that it runs in any image, into its data
// directory (named by a hash of the source, so an upgrade never replaces the binary that
// running containers have mounted), and Docker mounts it read-only into each instance.
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { compileOnce } from 'node-nvml-bindings';

export const LOG_INIT_SOURCE = fileURLToPath(new URL('../../log-init/log_init.c', import.meta.url));
/** Where the limiter is mounted in an instance's container. */
export const LOG_INIT_TARGET = '/.svc/log-init';

export interface LogLimit {
  /** The compiled limiter on this host. */
  path: string;
  bytesPerSecond: number;
  linesPerSecond: number;
}

/** The image's own command, as `docker image inspect` reports it. */
export interface ImageCommand {
  entrypoint: string[];
  cmd: string[];
}

/**
 * The Entrypoint and Cmd that run `command` (or the image's CMD) behind the limiter,
 * exactly as Docker would have run them without it; null when there is nothing to run,
 * so that Docker refuses the create with its own message.
 */
export function limitedCommand(image: ImageCommand, command: string[] | undefined, limit: LogLimit): { Entrypoint: string[]; Cmd: string[] } | null {
  const cmd = command && command.length > 0 ? command : image.cmd;
  if (image.entrypoint.length + cmd.length === 0) return null;
  return { Entrypoint: [LOG_INIT_TARGET, String(limit.bytesPerSecond), String(limit.linesPerSecond), '--', ...image.entrypoint], Cmd: cmd };
}

/** Compiles the limiter into `dir` (with `$CC` or gcc) unless this source's build is there; returns its path. */
export function buildLogInit(dir: string): Promise<string> {
  return compileOnce({
    source: LOG_INIT_SOURCE,
    flags: ['-static', '-O2'],
    output: (hash) => join(dir, `svc-log-init-${hash}`),
    what: 'the log limiter',
    hint: 'it needs a C compiler and a static libc: Debian\'s build-essential',
    mode: 0o755,
  });
}
