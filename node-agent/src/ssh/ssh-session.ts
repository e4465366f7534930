// One SSH session channel of a connection into an instance: pty and window size, passed
// environment, and then a shell, a command (`ssh host cmd`) or the SFTP subsystem. The
// process runs in the container through Docker exec; its stdout, stderr and exit status
// reach the client as OpenSSH's would. A session whose client goes away hangs its
// process up, so nothing it ran lingers in the container.
import type Docker from 'dockerode';
import type { PseudoTtyInfo, ServerChannel, Session } from 'ssh2';
import type { Logger } from '@svc/shared';
import type { Throttle } from '../access/throttled-socket.js';
import type { AccessEntry } from '../access/access-registry.js';
import type { LockHold } from '../access/container-fs.js';
import type { SessionBudgets } from './sftp-session.js';
import { ContainerProcess } from '../access/container-process.js';
import type { EngineCallKind } from '../access/instance-pacer.js';
import { SftpSession, type SftpLimits } from './sftp-session.js';
import { clampTerminal, envAccepted, execCommand, shellCommand, signalName, withTerminalSize } from './session-request.js';

/** What one session may ask for. */
export interface SessionLimits {
  maxEnvVars: number;
  /** Names and values together. */
  maxEnvBytes: number;
  maxPtyDimension: number;
  sftp: SftpLimits;
}

export interface SessionContext {
  docker: Docker;
  entry: AccessEntry;
  log: Logger;
  limits: SessionLimits;
  /** Whether the instance is still open (not stopping or gone), for the goodbye message. */
  instanceOpen(): boolean;
  /** Whether the image has /bin/bash (asked once per connection). */
  hasBash(): Promise<boolean>;
  /** Whether the image has /bin/sh (asked once per connection). */
  hasShell(): Promise<boolean>;
  /** The instance's share of the gateway's bandwidth (undefined: not held). */
  throttle(): Throttle | undefined;
  /** Waits until the instance may make one more Docker engine call of this kind (access/instance-pacer.ts). */
  pace(kind: EngineCallKind): Promise<void>;
  /** Whether the client's connection is still there (ssh2 reports a channel closed only once its input is read). */
  connectionOpen(): boolean;
  /** Tracks an engine stream that locks the container (AccessRegistry.holdEngine). */
  holdEngine: LockHold;
  /** The instance's budgets of what its SFTP sessions hold on the node, shared by its sessions. */
  budgets?: SessionBudgets;
}

/** Handles to what a session runs, so the connection can end it when the instance goes. */
export interface SessionHandle {
  /** Tells the client why and ends the session. */
  close(reason: string): void;
}

const MAX_SIGNALS_IN_FLIGHT = 8;

export function handleSession(session: Session, ctx: SessionContext): SessionHandle {
  let pty: PseudoTtyInfo | undefined;
  const env: string[] = [];
  let envBytes = 0;
  const { maxPtyDimension } = ctx.limits;
  let process: ContainerProcess | undefined;
  let channel: ServerChannel | undefined;
  let closing: string | undefined;

  session.on('pty', (accept, _reject, info) => {
    pty = { ...info, ...clampTerminal(info.rows, info.cols, maxPtyDimension), term: String(info.term ?? 'xterm').slice(0, 64) };
    accept?.();
  });
  // Each resize is a Docker engine call (measured: about 0.6 ms of dockerd's and
  // containerd's CPU; 2,000 from one client took 1.2 s of it), and a client may send
  // window changes without end. So the latest size waits for the one in flight and its
  // turn in the instance's pace, and the sizes in between are dropped.
  let wantedSize: { rows: number; cols: number } | undefined;
  let resizing = false;
  const resizeToLatest = async (): Promise<void> => {
    if (resizing) return;
    resizing = true;
    try {
      while (wantedSize && process?.running) {
        await ctx.pace('resize');
        const size = wantedSize;
        wantedSize = undefined;
        await process.resize(size.rows, size.cols).catch((err: unknown) => ctx.log.debug({ err }, 'resize failed'));
      }
    } finally {
      resizing = false;
    }
  };
  session.on('window-change', (accept, _reject, info) => {
    const size = clampTerminal(info.rows, info.cols, maxPtyDimension);
    if (pty) pty = { ...pty, ...size };
    wantedSize = size;
    void resizeToLatest();
    accept?.();
  });
  session.on('env', (accept, reject, info) => {
    const bytes = Buffer.byteLength(info.key) + Buffer.byteLength(info.val);
    if (env.length < ctx.limits.maxEnvVars && envBytes + bytes <= ctx.limits.maxEnvBytes && envAccepted(info.key, info.val)) {
      env.push(`${info.key}=${info.val}`);
      envBytes += bytes;
      accept?.();
    } else {
      reject?.();
    }
  });
  // A signal before the process exists is refused; one before it runs waits for its pid
  // (container-process.ts). A storm of them is cut off: a few may wait at once.
  let signalsInFlight = 0;
  session.on('signal', (accept, reject, info) => {
    const signal = signalName(info.name);
    if (!signal || !process || signalsInFlight >= MAX_SIGNALS_IN_FLIGHT) return reject?.();
    signalsInFlight++;
    process
      .signal(signal)
      .catch((err: unknown) => ctx.log.debug({ err }, 'signal failed'))
      .finally(() => signalsInFlight--);
    accept?.();
  });
  session.on('auth-agent', (_accept, reject) => reject?.());
  session.on('x11', (_accept, reject) => reject?.());

  const run = async (accepted: ServerChannel, cmd: string[]): Promise<void> => {
    channel = accepted;
    const tty = pty !== undefined;
    const size = { rows: pty?.rows || 24, cols: pty?.cols || 80 };
    try {
      await ctx.pace('exec');
      // The client may have left while the session waited its turn: start nothing for it.
      if (!ctx.connectionOpen()) return;
      process = await ContainerProcess.start(ctx.docker, ctx.entry.containerId, {
        cmd: tty ? withTerminalSize(cmd, size.rows, size.cols) : cmd,
        tty,
        env: [...(tty ? [`TERM=${pty!.term || 'xterm'}`] : []), ...env],
        ...(tty ? { size } : {}),
      });
    } catch (err) {
      accepted.stderr.write(`${ctx.entry.instanceId}: cannot start ${cmd.join(' ')}: ${(err as Error).message}\r\n`);
      accepted.exit(255);
      accepted.end();
      return;
    }
    const running = process;
    running.stdout.pipe(accepted, { end: false });
    running.stderr.pipe(accepted.stderr, { end: false });
    // EOF from the client closes a plain session's stdin; a terminal has no EOF to pass
    // (sshd ignores it too), and Docker would end a TTY exec's output with its input.
    accepted.pipe(running.stdin, { end: !tty });
    // The client closed the channel or vanished while the process runs (or starts): hang it up.
    const hangUp = (): void => {
      if (running.running) running.hangUp().catch((err: unknown) => ctx.log.warn({ err, instance: ctx.entry.instanceId }, 'hanging up a session failed'));
    };
    accepted.once('close', hangUp);
    if (!ctx.connectionOpen()) hangUp();
    const [exit] = await Promise.all([running.exited, ended(running.stdout), ended(running.stderr)]);
    if (accepted.destroyed) return; // the client left first
    if (closing || !ctx.instanceOpen()) {
      accepted.stderr.write(`\r\n${closing ?? `instance ${ctx.entry.instanceId} is stopping`}\r\n`);
    }
    // OpenSSH reports 255 when the session ends without an exit status; so do we when Docker has none.
    accepted.exit(exit.code ?? 255);
    accepted.end();
  };

  // One program per session (RFC 4254, 6.5: a shell, a command or a subsystem). A second
  // request on the same session had started a process nobody tracked, each holding one
  // of the agent's sockets to dockerd: ssh2 answers its accept() with no channel.
  let started = false;
  const start = <T>(accept: () => T | undefined, reject: (() => void) | undefined): T | undefined => {
    if (started) {
      reject?.();
      return undefined;
    }
    const accepted = accept();
    if (accepted) started = true;
    return accepted;
  };
  session.on('shell', (accept, reject) => {
    const accepted = start(accept, reject);
    if (!accepted) return;
    ctx.hasBash().then(
      (bash) => run(accepted, shellCommand(bash)),
      () => run(accepted, shellCommand(false)),
    ).catch((err: unknown) => ctx.log.error({ err }, 'shell session failed'));
  });
  session.on('exec', (accept, reject, info) => {
    const accepted = start(accept, reject);
    if (!accepted) return;
    run(accepted, execCommand(info.command)).catch((err: unknown) => ctx.log.error({ err }, 'exec session failed'));
  });
  session.on('sftp', (accept, reject) => {
    const sftp = start(accept, reject);
    if (!sftp) return;
    new SftpSession(sftp, ctx.docker, ctx.entry, ctx.log, ctx.limits.sftp, ctx.hasShell, ctx.throttle, ctx.pace, ctx.holdEngine, ctx.budgets);
  });

  return {
    close(reason) {
      closing = reason;
      if (!channel) return;
      if (process?.running) {
        // The container is going away; hang the process up so run() says why and ends.
        process.hangUp().catch((err: unknown) => ctx.log.warn({ err, instance: ctx.entry.instanceId }, 'hanging up a session failed'));
        return;
      }
      try {
        channel.stderr.write(`\r\n${reason}\r\n`);
        channel.exit(255);
        channel.end();
      } catch {
        // The client closed the channel already.
      }
    },
  };
}

function ended(stream: NodeJS.ReadableStream): Promise<void> {
  return new Promise((resolve) => {
    if ((stream as { readableEnded?: boolean }).readableEnded) return resolve();
    stream.once('end', resolve);
    stream.once('close', resolve);
  });
}
