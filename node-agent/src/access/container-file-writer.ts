// An upload streamed into a file of the container through a Docker exec of the image's
// own shell (`cat >> FILE`), with backpressure: the node holds no more than the exec
// socket's buffer, whatever the file's size. The process runs as the container's user,
// so the usual permissions apply (unlike the archive API, which writes as root). Images
// without /bin/sh cannot do this; the SFTP server stages small files for them instead.
import { once } from 'node:events';
import type Docker from 'dockerode';
import { ContainerProcess } from './container-process.js';
import { FsError } from './container-fs.js';

/** How the file is opened for the stream: appended to, or written over from its start. */
export type WriteStart = 'append' | 'overwrite';

const SCRIPT: Record<WriteStart, string> = {
  append: 'exec cat >> "$1"',
  // `1<>` opens read-write without truncating: bytes are replaced from offset 0.
  overwrite: 'exec cat 1<> "$1"',
};

/** Keeps the end of what a helper said, for the error a client sees. */
const STDERR_KEEP = 4096;

export class ContainerFileWriter {
  private stderr = '';
  private failed: FsError | undefined;

  private constructor(
    private readonly path: string,
    private readonly process: ContainerProcess,
  ) {
    process.stderr.on('data', (d: Buffer) => {
      this.stderr = (this.stderr + d.toString()).slice(-STDERR_KEEP);
    });
    process.stdout.resume();
  }

  static async open(docker: Docker, containerId: string, path: string, start: WriteStart): Promise<ContainerFileWriter> {
    const process = await ContainerProcess.start(docker, containerId, { cmd: ['/bin/sh', '-c', SCRIPT[start], 'sh', path] });
    return new ContainerFileWriter(path, process);
  }

  /**
   * Creates or truncates the file (and sets a new file's mode), as SFTP's OPEN does, so a
   * path that cannot be written fails at open with the shell's reason.
   */
  static async prepare(docker: Docker, containerId: string, path: string, how: { truncate: boolean; createMode?: number }): Promise<void> {
    const script = `${how.truncate ? ': > "$1"' : ': >> "$1"'}${how.createMode !== undefined ? ' && chmod "$2" "$1"' : ''}`;
    const result = await ContainerProcess.run(docker, containerId, ['/bin/sh', '-c', script, 'sh', path, (how.createMode ?? 0o644).toString(8)]);
    if (result.code !== 0) throw helperError(result.code, result.stderr || result.stdout, path);
  }

  /** Writes a chunk; resolves once the exec socket takes more (backpressure). */
  async write(data: Buffer): Promise<void> {
    if (this.failed) throw this.failed;
    if (!this.process.running) throw (this.failed = await this.exitError());
    if (this.process.stdin.write(data)) return;
    const drained = once(this.process.stdin, 'drain').then(() => true);
    const exited = this.process.exited.then(() => false);
    if (!(await Promise.race([drained, exited]))) throw (this.failed = await this.exitError());
  }

  /** Ends the stream and waits for the file to be complete; fails with the helper's reason. */
  async finish(): Promise<void> {
    if (this.failed) throw this.failed;
    this.process.stdin.end();
    const exit = await this.process.exited;
    if (exit.code !== 0) throw (this.failed = helperError(exit.code, this.stderr, this.path));
  }

  /** Gives up (the client went away): the helper sees EOF or a hangup; what was written stays, as with sshd. */
  abort(): void {
    this.process.hangUp(0).catch(() => undefined);
  }

  private async exitError(): Promise<FsError> {
    const exit = await this.process.exited;
    return helperError(exit.code, this.stderr, this.path);
  }
}

function helperError(code: number | null, output: string, path: string): FsError {
  const text = output.trim().replace(/^sh: /, '');
  if (code === 126 || code === 127 || /executable file not found|not found/.test(text)) {
    return new FsError('EUNSUPPORTED', `writing ${path} needs \`cat\` in the instance's image: ${text || `exit ${code}`}`);
  }
  if (/permission denied|read-only/i.test(text)) return new FsError('EACCES', `${path}: ${text}`);
  if (/no such file or directory|nonexistent directory/i.test(text)) return new FsError('ENOENT', `${path}: ${text}`);
  if (/is a directory/i.test(text)) return new FsError('EISDIR', `${path}: ${text}`);
  if (/no space left/i.test(text)) return new FsError('EIO', `${path}: ${text}`);
  return new FsError('EIO', `${path}: ${text || (code === null ? 'the instance stopped' : `the writer exited with ${code}`)}`);
}
