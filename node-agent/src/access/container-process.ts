// One process run inside an instance's container through the Docker exec API: what SSH
// sessions, SFTP fallbacks and the Jupyter launcher use, so any image works without an
// sshd in it. With a TTY the output is one raw stream; without, Docker multiplexes
// stdout and stderr, split here with backpressure. The exit code comes from exec inspect.
// hangUp() is what a dropped client gets: SIGHUP to the process and what it started (as
// a terminal hangup would), then SIGKILL for the process itself if it is still there.
import { PassThrough, type Readable, type Writable } from 'node:stream';
import type { Duplex } from 'node:stream';
import type Docker from 'dockerode';
import { ExecFrameParser } from './exec-frames.js';
import { processTree, signalAll } from './process-tree.js';
import { checkPid } from './signal-guard.js';

export interface ExecRequest {
  cmd: string[];
  tty?: boolean;
  /** KEY=VALUE entries added to the container's own environment. */
  env?: string[];
  workingDir?: string;
  /** Attach stdin (default true). */
  stdin?: boolean;
  /** Initial terminal size (TTY only). */
  size?: { rows: number; cols: number };
}

export interface ExecExit {
  /** Null when Docker did not record one (the container went away under the process). */
  code: number | null;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** run()'s bounds unless the caller says otherwise. */
export const HELPER_TIMEOUT_MS = 30_000;
export const HELPER_OUTPUT_BYTES = 64 * 1024;

export class ContainerProcess {
  /** Raw output (TTY), or stdout (no TTY). Ends when the process's output ends. */
  readonly stdout: Readable;
  /** Empty with a TTY (a terminal has one output). */
  readonly stderr: Readable;
  /** The process's stdin; end() gives it EOF. */
  readonly stdin: Writable;
  /** Settles once the output ended and Docker recorded the exit. */
  readonly exited: Promise<ExecExit>;
  private hostPid: number | undefined;
  /** One wait for the host pid, shared by every signal that arrives before it is known. */
  private pidWait: Promise<number | undefined> | undefined;
  private initPid: Promise<number | undefined> | undefined;
  private done = false;

  private constructor(
    private readonly container: Docker.Container,
    private readonly exec: Docker.Exec,
    private readonly socket: Duplex,
    tty: boolean,
  ) {
    this.stdin = socket;
    if (tty) {
      this.stdout = socket;
      this.stderr = new PassThrough();
      (this.stderr as PassThrough).end();
    } else {
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      this.stdout = stdout;
      this.stderr = stderr;
      demultiplex(socket, stdout, stderr);
    }
    const outputEnded = new Promise<void>((resolve) => {
      socket.once('end', resolve);
      socket.once('close', resolve);
    });
    this.exited = outputEnded.then(() => this.waitForExit()).finally(() => {
      this.done = true;
    });
    // A reset socket (the container vanished) surfaces as the end of the output.
    socket.on('error', () => undefined);
  }

  static async start(docker: Docker, containerId: string, request: ExecRequest): Promise<ContainerProcess> {
    const tty = request.tty ?? false;
    const stdin = request.stdin ?? true;
    const container = docker.getContainer(containerId);
    const exec = await container.exec({
      Cmd: request.cmd,
      AttachStdin: stdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: tty,
      ...(request.env && request.env.length > 0 ? { Env: request.env } : {}),
      ...(request.workingDir ? { WorkingDir: request.workingDir } : {}),
      // Engines from API 1.42 on size the terminal from the start; older ones get the resize below.
      ...(tty && request.size ? { ConsoleSize: [request.size.rows, request.size.cols] } : {}),
    } as Docker.ExecCreateOptions);
    const socket = (await exec.start({ hijack: true, stdin, Tty: tty, ...(tty && request.size ? { ConsoleSize: [request.size.rows, request.size.cols] } : {}) } as Docker.ExecStartOptions)) as unknown as Duplex;
    const process = new ContainerProcess(container, exec, socket, tty);
    if (tty && request.size) await process.initialResize(request.size.rows, request.size.cols);
    return process;
  }

  /**
   * Runs a short helper command to completion and collects its output. The program is the
   * image's (a tenant's: its `rm`, its `jupyter-notebook --version`), so it is bounded: past
   * `timeoutMs` or `maxOutputBytes` on either stream it is killed, and the result has code
   * null and says why in stderr. Unbounded, what one printing without end printed was
   * collected in the agent's memory without limit, and one that never ended held up
   * whatever waited for it.
   */
  static async run(
    docker: Docker,
    containerId: string,
    cmd: string[],
    options: { stdin?: Buffer; timeoutMs?: number; maxOutputBytes?: number } = {},
  ): Promise<{ code: number | null; stdout: string; stderr: string }> {
    const { timeoutMs = HELPER_TIMEOUT_MS, maxOutputBytes = HELPER_OUTPUT_BYTES } = options;
    const p = await ContainerProcess.start(docker, containerId, { cmd, stdin: options.stdin !== undefined });
    if (options.stdin !== undefined) p.stdin.end(options.stdin);
    let stopped: string | undefined;
    let killed: Promise<void> = Promise.resolve();
    const stop = (why: string): void => {
      if (stopped) return;
      stopped = why;
      // The flow first: while it runs at full speed, the engine is too busy to say which
      // process to kill (measured: seconds, under load).
      p.cutOff();
      killed = p.kill();
    };
    const timer = setTimeout(() => stop(`it ran past ${timeoutMs} ms`), timeoutMs);
    const tooMuch = () => stop(`it printed more than ${maxOutputBytes} bytes`);
    try {
      const [stdout, stderr, exit] = await Promise.all([collect(p.stdout, maxOutputBytes, tooMuch), collect(p.stderr, maxOutputBytes, tooMuch), p.exited]);
      await killed;
      if (stopped) return { code: null, stdout, stderr: `${stderr}${stderr && !stderr.endsWith('\n') ? '\n' : ''}${cmd[0]} was stopped: ${stopped}` };
      return { code: exit.code, stdout, stderr };
    } finally {
      clearTimeout(timer);
    }
  }

  get running(): boolean {
    return !this.done;
  }

  async resize(rows: number, cols: number): Promise<void> {
    if (this.done || rows <= 0 || cols <= 0) return;
    try {
      await this.exec.resize({ h: rows, w: cols });
    } catch (err) {
      // The process may have exited in between; a resize of nothing is not an error.
      if (!this.done) throw err;
    }
  }

  /**
   * The first resize races the process's start (Docker refuses to resize an exec that is
   * not running yet), so it is retried a few times, as the Docker CLI does.
   */
  private async initialResize(rows: number, cols: number): Promise<void> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.resize(rows, cols);
      } catch (err) {
        // A process that is already done needs no size.
        if (attempt >= 10 || !(await this.isRunning())) return;
        await sleep(10 * attempt);
      }
    }
  }

  private async isRunning(): Promise<boolean> {
    if (this.done) return false;
    try {
      const info = (await this.exec.inspect()) as { Running: boolean; ExitCode: number | null };
      // Not started yet: not running and no exit code.
      return info.Running || info.ExitCode === null;
    } catch {
      return false;
    }
  }

  /**
   * The process's PID on the host, from exec inspect. Docker says 0 until the process
   * runs, so this waits a little for a real one; undefined when there is none (it never
   * started, or ended first). Never 0: kill(0) would signal the agent's process group.
   */
  pid(): Promise<number | undefined> {
    if (this.hostPid !== undefined) return Promise.resolve(this.hostPid);
    this.pidWait ??= (async () => {
      for (let attempt = 0; attempt < 80 && !this.done; attempt++) {
        let info: { Running: boolean; ExitCode: number | null; Pid: number };
        try {
          info = (await this.exec.inspect()) as typeof info;
        } catch {
          return undefined;
        }
        if (Number.isInteger(info.Pid) && info.Pid > 1) return (this.hostPid = info.Pid);
        if (!info.Running && info.ExitCode !== null) return undefined;
        await sleep(25);
      }
      return undefined;
    })().finally(() => {
      this.pidWait = undefined;
    });
    return this.pidWait;
  }

  /** The host pid of the process, when it is safe to signal: a process of this container. */
  private async signallablePid(): Promise<number | undefined> {
    const pid = await this.pid();
    if (pid === undefined || this.done) return undefined;
    return this.ofThisContainer(pid);
  }

  private async ofThisContainer(pid: number): Promise<number | undefined> {
    this.initPid ??= this.container.inspect().then(
      (info) => (info.State?.Pid && info.State.Pid > 1 ? info.State.Pid : undefined),
      () => undefined,
    );
    const verdict = await checkPid(pid, await this.initPid);
    return verdict.send ? pid : undefined;
  }

  /** Stops reading the process's output here and now (it may go on running: see kill). */
  cutOff(): void {
    this.socket.destroy();
  }

  /** SIGKILL to the process and its descendants if it still runs, whether or not its output is still read. */
  async kill(): Promise<void> {
    // Waits for a real pid: the engine can report 0 for a process that has already printed
    // (seen: a helper stopped after 64 KiB of output, then left running at full speed).
    const found = await this.pid();
    if (found === undefined) return;
    let running: boolean;
    try {
      running = ((await this.exec.inspect()) as { Running: boolean }).Running;
    } catch {
      return; // the container went away with it
    }
    // Ended meanwhile: its pid may already be another process's.
    if (!running) return;
    const pid = await this.ofThisContainer(found);
    if (pid !== undefined) signalAll(await processTree(pid), 'SIGKILL');
  }

  /**
   * Sends a signal to the process itself (SSH `signal` requests). A signal that comes
   * before the process runs waits for its pid; one for a process that never ran or
   * already ended is dropped. Answers whether it was sent.
   */
  async signal(signal: NodeJS.Signals): Promise<boolean> {
    if (this.done) return false;
    const pid = await this.signallablePid();
    if (pid === undefined) return false;
    signalAll([pid], signal);
    return true;
  }

  /**
   * The client is gone: SIGHUP to the process and its descendants, and SIGKILL to the
   * process if it outlives `graceMs`. Descendants that ignore SIGHUP (nohup) keep running,
   * as they would after an OpenSSH session's hangup.
   */
  async hangUp(graceMs = 2_000): Promise<void> {
    if (!this.done) {
      const pid = await this.signallablePid();
      if (pid !== undefined) {
        signalAll(await processTree(pid), 'SIGHUP');
        await Promise.race([this.exited, sleep(graceMs)]);
        if (!this.done && (await this.signallablePid()) === pid) signalAll(await processTree(pid).then((tree) => tree.slice(0, 1)), 'SIGKILL');
      }
    }
    this.socket.destroy();
  }

  private async waitForExit(): Promise<ExecExit> {
    // The output can end a moment before Docker records the exit.
    for (let attempt = 0; ; attempt++) {
      let info: { Running: boolean; ExitCode: number | null; Pid: number };
      try {
        info = (await this.exec.inspect()) as typeof info;
      } catch {
        return { code: null }; // the container (and its exec records) went away
      }
      if (info.Pid > 1) this.hostPid ??= info.Pid;
      if (!info.Running || attempt >= 40) return { code: info.Running ? null : info.ExitCode };
      await sleep(25);
    }
  }
}

/** Splits Docker's multiplexed stream into stdout and stderr, pausing the socket while either is full. */
function demultiplex(socket: Duplex, stdout: PassThrough, stderr: PassThrough): void {
  const parser = new ExecFrameParser();
  // The streams that are full, each waited for once however many frames went to it.
  const full = new Set<PassThrough>();
  socket.on('data', (chunk: Buffer) => {
    for (const frame of parser.push(chunk)) {
      const target = frame.stream === 'stderr' ? stderr : stdout;
      if (!target.write(frame.payload) && !full.has(target)) {
        full.add(target);
        target.once('drain', () => {
          full.delete(target);
          if (full.size === 0) socket.resume();
        });
      }
    }
    if (full.size > 0) socket.pause();
  });
  const finish = (): void => {
    stdout.end();
    stderr.end();
  };
  socket.once('end', finish);
  socket.once('close', finish);
}

/** The stream's first `max` bytes as text; past them `overflow` is called and the rest is read and dropped. */
async function collect(stream: Readable, max: number, overflow: () => void): Promise<string> {
  const chunks: Buffer[] = [];
  let kept = 0;
  for await (const chunk of stream) {
    const buffer = chunk as Buffer;
    const room = max - kept;
    // Any byte past the bound overflows, also when an earlier chunk filled it exactly.
    if (buffer.length > room) overflow();
    if (room <= 0) continue;
    chunks.push(buffer.length > room ? buffer.subarray(0, room) : buffer);
    kept += Math.min(buffer.length, room);
  }
  return Buffer.concat(chunks).toString('utf8');
}
