// Files of an instance's container, reached through the Docker engine rather than a tool
// inside the image: stat through the archive HEAD (X-Docker-Container-Path-Stat), reads,
// listings and writes through the archive API's tar streams. What the archive API cannot
// do (remove, rename, chmod) runs the image's own `rm`/`mv`/`chmod` through exec, and
// says so when the image has none. The SFTP server is built on this.
import { posix } from 'node:path';
import type { Readable, Writable } from 'node:stream';
import type Docker from 'dockerode';
import * as tar from 'tar-stream';
import { dockerMessage, dockerStatus } from '../runtime/docker-errors.js';
import { LOG_INIT_TARGET } from '../runtime/log-init.js';
import { ContainerProcess } from './container-process.js';
import type { EngineCallKind } from './instance-pacer.js';
import { parseDirListing } from './dir-listing.js';
import { isDirectory, isSymlink, posixModeFromGo, posixModeFromTar } from './file-modes.js';

export type FsErrorCode = 'ENOENT' | 'EEXIST' | 'ENOTDIR' | 'EISDIR' | 'ENOTEMPTY' | 'EACCES' | 'ELOOP' | 'EUNSUPPORTED' | 'EIO';

export class FsError extends Error {
  override readonly name = 'FsError';
  constructor(
    readonly code: FsErrorCode,
    message: string,
  ) {
    super(message);
  }
}

export interface FileStat {
  name: string;
  /** POSIX st_mode: type and permission bits. */
  mode: number;
  size: number;
  /** Seconds since the epoch. */
  mtime: number;
  /** Known from tar listings; undefined from a path stat. */
  uid?: number;
  gid?: number;
  /** Symlinks: where they point (Docker resolves path stats to an absolute target). */
  linkTarget?: string;
}

const MAX_SYMLINK_HOPS = 16;

const TAR_HEADER_BYTES = 512;
/** What a listing may print: about 100,000 entries with their attributes. */
const MAX_LISTING_BYTES = 16 * 2 ** 20;
const LISTER_ERRORS: Record<number, FsErrorCode> = { 2: 'ENOENT', 3: 'ENOTDIR', 4: 'EACCES' };

/**
 * Registers an engine stream that holds the container's lock (Docker 20.10 locks a
 * container while an archive is streamed from or to it: no inspect, no kill meanwhile);
 * `close` ends it when the instance stops. Returns the function that forgets it, or
 * undefined when no such stream may be opened now (the instance is stopping).
 */
export type LockHold = (close: () => void) => (() => void) | undefined;

const holdAlways: LockHold = () => () => undefined;

export class ContainerFs {
  /** Whether the agent's lister is mounted in the container, once asked. */
  private lister: Promise<boolean> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly containerId: string,
    /** Waits until one more engine call of this kind may go out (the SFTP server's: access/instance-pacer.ts). */
    private readonly pace: (kind: EngineCallKind) => Promise<void> = async () => undefined,
    private readonly hold: LockHold = holdAlways,
  ) {}

  private get container(): Docker.Container {
    return this.docker.getContainer(this.containerId);
  }

  /** The path itself (a symlink is reported as the link). */
  async lstat(path: string): Promise<FileStat> {
    let response: { headers?: Record<string, string | string[] | undefined> };
    try {
      await this.pace('archive');
      response = (await this.container.infoArchive({ path })) as unknown as typeof response;
    } catch (err) {
      throw fsErrorOf(err, path);
    }
    const header = response.headers?.['x-docker-container-path-stat'];
    if (typeof header !== 'string') throw new FsError('EIO', `the Docker engine gave no stat for ${path}`);
    const stat = JSON.parse(Buffer.from(header, 'base64').toString('utf8')) as { name: string; size: number; mode: number; mtime: string; linkTarget?: string };
    const mode = posixModeFromGo(stat.mode);
    return {
      name: stat.name,
      mode,
      size: stat.size,
      mtime: Math.floor(Date.parse(stat.mtime) / 1000),
      ...(isSymlink(mode) && stat.linkTarget ? { linkTarget: stat.linkTarget } : {}),
    };
  }

  /** Follows symlinks; also returns the path they led to. */
  async stat(path: string): Promise<FileStat & { realPath: string }> {
    let current = path;
    for (let hop = 0; hop <= MAX_SYMLINK_HOPS; hop++) {
      const stat = await this.lstat(current);
      if (!isSymlink(stat.mode) || !stat.linkTarget) return { ...stat, realPath: current };
      current = posix.resolve(posix.dirname(current), stat.linkTarget);
    }
    throw new FsError('ELOOP', `too many levels of symbolic links at ${path}`);
  }

  /**
   * The entries of a directory (not `.` and `..`). Asked of the agent's lister inside the
   * container (dir-listing.ts) as the container's user; a container without it (started
   * before it, or with the log limiter off) is listed from the archive API's tar headers,
   * which costs the engine everything under the directory: `pace` is awaited with the
   * size of each entry before its content is read past.
   */
  async readDir(path: string, pace?: (bytes: number) => Promise<void>): Promise<FileStat[]> {
    const dir = await this.stat(path);
    if (!isDirectory(dir.mode)) throw new FsError('ENOTDIR', `${path} is not a directory`);
    if (await this.hasLister()) return this.listInContainer(dir.realPath, path);
    const entries: FileStat[] = [];
    // `<dir>/.` archives the directory's content with names `./<child>[/...]`, through symlinks.
    await this.walkArchive(`${dir.realPath.replace(/\/$/, '')}/.`, async (header) => {
      await pace?.(TAR_HEADER_BYTES + (header.size ?? 0));
      const name = header.name.replace(/^\.\//, '').replace(/\/$/, '');
      if (name === '' || name === '.' || name.includes('/')) return;
      entries.push({
        name,
        mode: posixModeFromTar(header.type, header.mode),
        size: header.type === 'file' ? (header.size ?? 0) : 0,
        mtime: Math.floor((header.mtime?.getTime() ?? 0) / 1000),
        uid: header.uid ?? 0,
        gid: header.gid ?? 0,
        ...(header.type === 'symlink' && header.linkname ? { linkTarget: header.linkname } : {}),
      });
    });
    return entries;
  }

  /** Streams a regular file's content into `sink` (ended at the end). */
  async readFile(path: string, sink: Writable): Promise<FileStat> {
    const stat = await this.stat(path);
    if (isDirectory(stat.mode)) throw new FsError('EISDIR', `${path} is a directory`);
    let found = false;
    await this.walkArchive(stat.realPath, async (_header, body) => {
      if (found) return;
      found = true;
      await copy(body, sink);
    });
    sink.end();
    if (!found) throw new FsError('EIO', `the Docker engine returned no content for ${path}`);
    return stat;
  }

  /**
   * A regular file's content, streamed from the engine's archive API as it is read: the
   * node keeps no copy, and a reader that stops pulling holds the engine's stream back.
   * Ending the iteration early (return()) closes the stream.
   */
  async *streamFile(realPath: string): AsyncGenerator<Buffer> {
    const { stream, release } = await this.openArchive(realPath);
    const extract = tar.extract();
    stream.on('error', (err: Error) => extract.destroy(err));
    stream.pipe(extract as unknown as NodeJS.WritableStream);
    try {
      for await (const entry of extract) {
        for await (const chunk of entry) yield chunk as Buffer;
        return;
      }
      throw new FsError('EIO', `the Docker engine returned no content for ${realPath}`);
    } finally {
      release();
      destroy(stream);
      extract.destroy();
    }
  }

  /** Writes (creates or replaces) a file from `content` of `size` bytes. */
  async writeFile(path: string, content: Readable, size: number, attrs: { mode: number; mtime?: number }): Promise<void> {
    const pack = tar.pack();
    const mtime = new Date((attrs.mtime ?? Math.floor(Date.now() / 1000)) * 1000);
    const entry = pack.entry({ name: posix.basename(path), type: 'file', size, mode: attrs.mode & 0o7777, mtime, uid: 0, gid: 0 });
    const writing = (async () => {
      await copy(content, entry);
      (entry as unknown as Writable).end(); // streamx's typings demand an argument
      pack.finalize();
    })();
    await Promise.all([this.putArchive(posix.dirname(path), pack as unknown as Readable), writing]);
  }

  async mkdir(path: string, mode: number): Promise<void> {
    await this.mustNotExist(path);
    await this.putEntry(path, { type: 'directory', mode: (mode & 0o7777) | 0, name: posix.basename(path) });
  }

  async symlink(target: string, path: string): Promise<void> {
    await this.mustNotExist(path);
    await this.putEntry(path, { type: 'symlink', linkname: target, mode: 0o777, name: posix.basename(path) });
  }

  async remove(path: string): Promise<void> {
    const stat = await this.lstat(path);
    if (isDirectory(stat.mode)) throw new FsError('EISDIR', `${path} is a directory; use rmdir`);
    await this.tool(['rm', '-f', '--', path], 'rm');
  }

  async rmdir(path: string): Promise<void> {
    const stat = await this.lstat(path);
    if (!isDirectory(stat.mode)) throw new FsError('ENOTDIR', `${path} is not a directory`);
    await this.tool(['rmdir', '--', path], 'rmdir');
  }

  /** SFTP v3 rename: the target must not exist. */
  async rename(from: string, to: string): Promise<void> {
    await this.lstat(from);
    await this.mustNotExist(to);
    await this.tool(['mv', '--', from, to], 'mv');
  }

  async chmod(path: string, mode: number): Promise<void> {
    await this.lstat(path);
    await this.tool(['chmod', (mode & 0o7777).toString(8), '--', path], 'chmod');
  }

  /** Sets a file's modification time (the image's `touch`; the archive API cannot). */
  async setMtime(path: string, mtime: number): Promise<void> {
    await this.tool(['touch', '-m', '-d', `@${Math.trunc(mtime)}`, '--', path], 'touch');
  }

  private async mustNotExist(path: string): Promise<void> {
    try {
      await this.lstat(path);
    } catch (err) {
      if (err instanceof FsError && err.code === 'ENOENT') return;
      throw err;
    }
    throw new FsError('EEXIST', `${path} already exists`);
  }

  private async putEntry(path: string, header: Parameters<tar.Pack['entry']>[0]): Promise<void> {
    const pack = tar.pack();
    pack.entry({ uid: 0, gid: 0, mtime: new Date(), ...header });
    pack.finalize();
    await this.putArchive(posix.dirname(path), pack as unknown as Readable);
  }

  private async putArchive(dir: string, archive: Readable): Promise<void> {
    let cut = false;
    const release = this.hold(() => {
      cut = true;
      archive.destroy(stopping(dir));
    });
    if (!release) throw stopping(dir);
    try {
      // copyUIDGID: the files belong to the container's user, as if that user had made them.
      await this.pace('archive');
      if (cut) throw stopping(dir);
      await this.container.putArchive(archive as unknown as NodeJS.ReadableStream, { path: dir, copyUIDGID: true });
    } catch (err) {
      throw cut ? stopping(dir) : fsErrorOf(err, dir);
    } finally {
      release();
    }
  }

  /** An archive of `path` from the engine, held (see LockHold) until `release`. */
  private async openArchive(path: string): Promise<{ stream: NodeJS.ReadableStream; release: () => void }> {
    let stream: NodeJS.ReadableStream | undefined;
    let cut = false;
    const release = this.hold(() => {
      cut = true;
      if (stream) destroy(stream, stopping(path));
    });
    if (!release) throw stopping(path);
    try {
      await this.pace('archive');
      if (!cut) stream = await this.container.getArchive({ path });
    } catch (err) {
      release();
      throw fsErrorOf(err, path);
    }
    if (cut || !stream) {
      if (stream) destroy(stream);
      release();
      throw stopping(path);
    }
    return { stream, release };
  }

  private async walkArchive(path: string, onEntry: (header: tar.Header, body: Readable) => void | Promise<void>): Promise<void> {
    const { stream, release } = await this.openArchive(path);
    try {
      const extract = tar.extract();
      stream.on('error', (err: Error) => extract.destroy(err));
      stream.pipe(extract as unknown as NodeJS.WritableStream);
      for await (const entry of extract) {
        await onEntry(entry.header, entry as unknown as Readable);
        entry.resume(); // skip what the callback did not read
      }
    } finally {
      release();
      destroy(stream);
    }
  }

  /**
   * Whether the lister is mounted in the container, from its mounts: not guessed from a
   * failed run, which the tenant could cause (a full pids limit) to get the archive way.
   */
  private hasLister(): Promise<boolean> {
    this.lister ??= this.container.inspect().then(
      (info) => (info.Mounts ?? []).some((m) => m.Destination === LOG_INIT_TARGET),
      (err: unknown) => {
        this.lister = undefined; // asked again next time
        throw fsErrorOf(err, '/');
      },
    );
    return this.lister;
  }

  private async listInContainer(realPath: string, path: string): Promise<FileStat[]> {
    await this.pace('exec');
    const result = await ContainerProcess.run(this.docker, this.containerId, [LOG_INIT_TARGET, '--list-dir', realPath], {
      maxOutputBytes: MAX_LISTING_BYTES,
    });
    if (result.code === 0) {
      try {
        return parseDirListing(result.stdout);
      } catch (err) {
        throw new FsError('EIO', `${path}: ${(err as Error).message}`);
      }
    }
    const why = result.stderr.trim() || `the lister exited with ${result.code}`;
    if (result.code === null && /printed more than/.test(why)) {
      throw new FsError('EIO', `${path} has too many entries to list (over ${MAX_LISTING_BYTES / 2 ** 20} MiB of names)`);
    }
    throw new FsError(LISTER_ERRORS[result.code ?? -1] ?? 'EIO', why.replace(/^svc-list-dir: /, ''));
  }

  /** Runs a tool of the image for what the archive API cannot do. */
  private async tool(cmd: string[], name: string): Promise<void> {
    await this.pace('exec');
    const result = await ContainerProcess.run(this.docker, this.containerId, cmd);
    if (result.code === 0) return;
    const output = (result.stderr || result.stdout).trim();
    if (result.code === 126 || result.code === 127 || /executable file not found/.test(output)) {
      throw new FsError('EUNSUPPORTED', `this needs \`${name}\` inside the instance, and its image has none`);
    }
    throw new FsError(/permission denied|read-only/i.test(output) ? 'EACCES' : 'EIO', output || `${name} exited with ${result.code}`);
  }
}

function fsErrorOf(err: unknown, path: string): FsError {
  const status = dockerStatus(err);
  const message = dockerMessage(err);
  if (status === 404) return new FsError('ENOENT', `${path}: no such file or directory`);
  if (status === 403 || /read-only|permission denied/i.test(message)) return new FsError('EACCES', `${path}: ${message}`);
  if (/not a directory/i.test(message)) return new FsError('ENOTDIR', `${path}: ${message}`);
  return new FsError('EIO', `${path}: ${message}`);
}

/** Copies with backpressure; works across Node streams and tar-stream's streamx ones. */
async function copy(from: AsyncIterable<unknown>, to: Writable | { write(chunk: unknown): boolean; once(event: 'drain', fn: () => void): unknown }): Promise<void> {
  for await (const chunk of from) {
    if (!to.write(chunk)) await new Promise<void>((resolve) => to.once('drain', resolve));
  }
}

function stopping(path: string): FsError {
  return new FsError('EIO', `${path}: the instance is stopping`);
}

function destroy(stream: NodeJS.ReadableStream, err?: Error): void {
  (stream as unknown as { destroy?(err?: Error): void }).destroy?.(err);
}
