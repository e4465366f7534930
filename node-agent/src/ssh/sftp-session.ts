// The SFTP subsystem (what `sftp` and OpenSSH 9's `scp` speak), served by the gateway
// itself over ContainerFs, so it works for images without an sftp-server. Files are
// streamed, never copied whole onto the node: a read pulls the file from the engine's
// archive API as the client asks for it; a write streams into the container through an
// exec of the image's shell (`cat >> FILE`), in order (early writes wait in a bounded
// window). Only an image without /bin/sh gets a staged file on the node, up to a small
// cap, put into the container whole when the handle is closed.
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, open, rm, type FileHandle } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, posix } from 'node:path';
import type Docker from 'dockerode';
import ssh2, { type Attributes, type FileEntry, type SFTPWrapper } from 'ssh2';
import type { Logger } from '@svc/shared';
import type { AccessEntry } from '../access/access-registry.js';
import { ByteReader } from '../access/byte-reader.js';
import type { Throttle } from '../access/throttled-socket.js';
import { ContainerFileWriter, type WriteStart } from '../access/container-file-writer.js';
import type { EngineCallKind } from '../access/instance-pacer.js';
import { ContainerFs, FsError, type FileStat, type LockHold } from '../access/container-fs.js';
import { isDirectory, modeString } from '../access/file-modes.js';
import { WriteOrder } from './write-order.js';
import type { InstanceBudget } from '../access/instance-budget.js';

const { OPEN_MODE, STATUS_CODE } = ssh2.utils.sftp;
/** Entries per READDIR answer, as OpenSSH's sftp-server sends them. */
const NAMES_PER_REPLY = 100;
/** The most one READ answers with (OpenSSH asks for 32 KiB or 256 KiB). */
const MAX_READ = 256 * 1024;
/**
 * How long a read handle's engine stream stays open without a READ. Docker 20.10 holds the
 * container's lock while an archive stream is open: a client that read once and then
 * nothing had kept the instance from being inspected or killed (its stop hung) and stalled
 * the node's disk watch behind it. A later READ opens the stream again at its offset.
 */
export const READER_IDLE_MS = 10_000;

/** Requests one SFTP session may have waiting for their answers (OpenSSH's client keeps up to 64 outstanding). */
export const MAX_QUEUED_REQUESTS = 512;

/** Open handles per SFTP session (each file handle may hold an exec or a stream). */
export const MAX_HANDLES = 64;

export interface SftpLimits {
  /** Largest file staged on the node for an image without /bin/sh. */
  stageLimitBytes: number;
  /** What all of one instance's uploads may hold in staging at once (instance-budget.ts). */
  stageBudgetBytes: number;
  /** What all of one instance's directory listings held open may take of the agent's memory, about (instance-budget.ts). */
  listingBudgetBytes: number;
  /** How far ahead of the upload's position writes may arrive and wait. */
  reorderWindowBytes: number;
}

/** A file opened for reading: streamed from the engine, restarted only for a backward seek. */
interface ReadHandleState {
  kind: 'read';
  path: string;
  stat: FileStat;
  reader?: ByteReader;
  /** Closes the engine's stream when the client stops reading (READER_IDLE_MS). */
  idle?: NodeJS.Timeout;
}

/** A file opened for writing, streamed into the container through the image's shell. */
interface WriteHandleState {
  kind: 'write';
  path: string;
  /** APPEND: every write goes to the end, in the order it came. */
  append: boolean;
  /** Size of the file at open when it was kept (not truncated, not new); 0 otherwise. */
  keptSize: number;
  /** Set at the first write of a kept file (it decides where the stream starts), else at open. */
  order?: WriteOrder;
  start: WriteStart;
  writer?: ContainerFileWriter;
  appended: number;
  mode: number;
}

/** Images without /bin/sh: the file is staged on the node (bounded) and put whole at close. */
interface StageHandleState {
  kind: 'stage';
  /** Bytes of the instance's staging budget this file holds (its largest size so far). */
  reserved: number;
  path: string;
  staged: FileHandle;
  stagedPath: string;
  writable: boolean;
  append: boolean;
  /** The container's copy must be replaced at close (written to, truncated or new). */
  dirty: boolean;
  mode: number;
  mtime?: number;
}

interface DirHandleState {
  kind: 'dir';
  entries: FileEntry[];
  /** What the listing holds of the instance's listing budget, about its size in memory. */
  held: number;
}

/** What an instance's SFTP sessions hold on the node, each against a budget of its own. */
export interface SessionBudgets {
  /** Bytes staged on the node's disk (uploads to images without /bin/sh). */
  staged: InstanceBudget;
  /** Bytes, about, of directory listings held in the agent's memory. */
  listings: InstanceBudget;
}

/** About what an entry of a listing held open costs the agent's memory. */
const listedBytes = (entry: FileEntry): number => 2 * (entry.filename.length + entry.longname.length) + 160;

type HandleState = ReadHandleState | WriteHandleState | StageHandleState | DirHandleState;

/** SFTP attributes of a stat. */
export function attrsOf(stat: FileStat): Attributes {
  return { mode: stat.mode, uid: stat.uid ?? 0, gid: stat.gid ?? 0, size: stat.size, atime: stat.mtime, mtime: stat.mtime };
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];

/**
 * `ls -l`-style line, as OpenSSH's sftp-server sends for `ls -l`. Made for every entry of
 * a listing on the agent's event loop: the month comes from a table, since Intl's
 * toLocaleString took about 40 us an entry (a directory of 480,000 files held every
 * tenant's SSH and Jupyter for 20 s).
 */
export function longName(stat: FileStat): string {
  const date = new Date(stat.mtime * 1000);
  const month = MONTHS[date.getUTCMonth()] ?? '???';
  const recent = Math.abs(Date.now() - date.getTime()) < 182 * 24 * 3_600_000;
  const when = recent
    ? `${String(date.getUTCHours()).padStart(2, '0')}:${String(date.getUTCMinutes()).padStart(2, '0')}`
    : String(date.getUTCFullYear());
  return `${modeString(stat.mode)}    1 ${String(stat.uid ?? 0).padEnd(8)} ${String(stat.gid ?? 0).padEnd(8)} ${String(stat.size).padStart(8)} ${month} ${String(date.getUTCDate()).padStart(2)} ${when.padStart(5)} ${stat.name}${stat.linkTarget ? ` -> ${stat.linkTarget}` : ''}`;
}

const pause = (ms: number): Promise<void> => (ms > 0 ? new Promise((resolve) => setTimeout(resolve, ms)) : Promise.resolve());

export class SftpSession {
  private readonly fs: ContainerFs;
  private readonly handles = new Map<string, HandleState>();
  private staging: Promise<string> | undefined;
  /** Requests still being answered, and whether the client has sent EOF. */
  private inFlight = 0;
  private clientDone = false;
  /** The channel closed: requests still queued are dropped, not carried out for nobody. */
  private closed = false;
  private queue: Promise<void> = Promise.resolve();

  constructor(
    private readonly sftp: SFTPWrapper,
    private readonly docker: Docker,
    private readonly entry: AccessEntry,
    private readonly log: Logger,
    private readonly limits: SftpLimits,
    /** Whether the image has /bin/sh to stream uploads through. */
    private readonly hasShell: () => Promise<boolean>,
    /** The instance's share of the gateway's bandwidth: skipped bytes are paid as sent ones. */
    private readonly throttle: () => Throttle | undefined = () => undefined,
    /** Waits until the instance may make one more Docker engine call of this kind. */
    private readonly pace: (kind: EngineCallKind) => Promise<void> = async () => undefined,
    /** Tracks engine streams that lock the container, so stopping the instance ends them. */
    holdEngine?: LockHold,
    /** The instance's budgets (instance-budget.ts), shared by all its sessions; absent: none beyond each file's and listing's own limit. */
    private readonly budgets?: SessionBudgets,
  ) {
    this.fs = new ContainerFs(docker, entry.containerId, pace, holdEngine);
    sftp.on('OPEN', (id, filename, flags, attrs) => this.answer(id, () => this.open(id, filename, flags, attrs)));
    sftp.on('READ', (id, handle, offset, length) => this.answer(id, () => this.read(id, handle, offset, length)));
    sftp.on('WRITE', (id, handle, offset, data) => this.answer(id, () => this.write(id, handle, offset, data)));
    sftp.on('FSTAT', (id, handle) => this.answer(id, () => this.fstat(id, handle)));
    sftp.on('FSETSTAT', (id, handle, attrs) => this.answer(id, () => this.fsetstat(id, handle, attrs)));
    sftp.on('CLOSE', (id, handle) => this.answer(id, () => this.close(id, handle)));
    sftp.on('OPENDIR', (id, path) => this.answer(id, () => this.opendir(id, path)));
    sftp.on('READDIR', (id, handle) => this.answer(id, async () => this.readdir(id, handle)));
    sftp.on('LSTAT', (id, path) => this.answer(id, async () => sftp.attrs(id, attrsOf(await this.fs.lstat(this.resolve(path))))));
    sftp.on('STAT', (id, path) => this.answer(id, async () => sftp.attrs(id, attrsOf(await this.fs.stat(this.resolve(path))))));
    sftp.on('REALPATH', (id, path) => this.answer(id, async () => {
      const resolved = this.resolve(path);
      sftp.name(id, [{ filename: resolved, longname: resolved, attrs: {} as Attributes }]);
    }));
    sftp.on('READLINK', (id, path) => this.answer(id, async () => {
      const stat = await this.fs.lstat(this.resolve(path));
      if (!stat.linkTarget) throw new FsError('EIO', `${path} is not a symbolic link`);
      sftp.name(id, [{ filename: stat.linkTarget, longname: stat.linkTarget, attrs: {} as Attributes }]);
    }));
    sftp.on('SETSTAT', (id, path, attrs) => this.answer(id, () => this.setstat(id, this.resolve(path), attrs)));
    sftp.on('MKDIR', (id, path, attrs) => this.answer(id, async () => {
      await this.fs.mkdir(this.resolve(path), (attrs as Partial<Attributes>).mode ?? 0o755);
      this.ok(id);
    }));
    sftp.on('RMDIR', (id, path) => this.answer(id, async () => {
      await this.fs.rmdir(this.resolve(path));
      this.ok(id);
    }));
    sftp.on('REMOVE', (id, path) => this.answer(id, async () => {
      await this.fs.remove(this.resolve(path));
      this.ok(id);
    }));
    sftp.on('RENAME', (id, from, to) => this.answer(id, async () => {
      await this.fs.rename(this.resolve(from), this.resolve(to));
      this.ok(id);
    }));
    // ssh2 hands the link path first, having undone OpenSSH's swapped argument order.
    sftp.on('SYMLINK', (id, linkPath, target) => this.answer(id, async () => {
      await this.fs.symlink(target, this.resolve(linkPath));
      this.ok(id);
    }));
    // The client is done (EOF): close our side once every request it made is answered.
    sftp.on('end', () => {
      this.clientDone = true;
      if (this.inFlight === 0) this.finish();
    });
    sftp.on('close', () => {
      this.closed = true;
      this.cleanUp().catch((err: unknown) => log.warn({ err }, 'closing SFTP handles failed'));
    });
  }

  /**
   * Ends the subsystem as sshd does when sftp-server exits: exit status 0, then close.
   * OpenSSH's scp fails a copy whose ssh reports no exit status. ssh2's SFTP object has no
   * exit(), so the status goes through its protocol handle, as ssh2's own Channel.exit does.
   */
  private finish(): void {
    const channel = this.sftp as unknown as { _protocol?: { exitStatus(id: number, status: number): void }; outgoing: { id: number; state: string } };
    if (channel.outgoing.state === 'open' || channel.outgoing.state === 'eof') channel._protocol?.exitStatus(channel.outgoing.id, 0);
    this.sftp.end();
  }

  /** Paths are relative to the home directory, as with sshd's sftp-server. */
  private resolve(path: string): string {
    return posix.resolve(this.entry.home, path || '.');
  }

  private ok(id: number): void {
    this.sftp.status(id, STATUS_CODE.OK);
  }

  /**
   * Runs a request after the ones before it; any failure becomes the matching SFTP status
   * with a message. One at a time, because OpenSSH's client expects the answers in order:
   * on reordered write acknowledgements scp truncates the upload at the first gap.
   */
  private answer(id: number, work: () => Promise<void> | void): void {
    // ssh2 refills the channel's window whatever we owe, so a client could queue requests
    // without end, each waiting its paced turn (one session had grown the agent's heap to
    // 2.6 GB in 30 s). OpenSSH's sftp keeps at most 64 outstanding.
    if (this.inFlight >= MAX_QUEUED_REQUESTS) {
      if (!this.closed) {
        this.closed = true;
        this.log.warn({ instance: this.entry.instanceId, queued: this.inFlight }, 'SFTP client sent requests far faster than they are answered; its session is closed');
        this.sftp.destroy();
      }
      return;
    }
    this.inFlight++;
    this.queue = this.queue
      .then(() => (this.closed ? undefined : work()))
      .catch((err: unknown) => {
        if (!(err instanceof FsError)) this.log.warn({ err, instance: this.entry.instanceId }, 'SFTP request failed');
        try {
          this.sftp.status(id, statusOf(err), err instanceof Error ? err.message : String(err));
        } catch {
          // The channel is gone; nobody to answer.
        }
      })
      .finally(() => {
        if (--this.inFlight === 0 && this.clientDone) this.finish();
      });
  }

  private handleOf(buffer: Buffer): HandleState {
    const state = this.handles.get(buffer.toString('hex'));
    if (!state) throw new FsError('EIO', 'invalid handle');
    return state;
  }

  private newHandle(state: HandleState): Buffer {
    if (this.handles.size >= MAX_HANDLES) throw new FsError('EIO', `too many open files in this session (${MAX_HANDLES}); close some`);
    const buffer = randomBytes(8);
    this.handles.set(buffer.toString('hex'), state);
    return buffer;
  }

  private stagingDir(): Promise<string> {
    this.staging ??= mkdtemp(join(tmpdir(), 'svc-sftp-'));
    return this.staging;
  }

  private async open(id: number, filename: string, flags: number, attrs: Partial<Attributes>): Promise<void> {
    const path = this.resolve(filename);
    let existing: (FileStat & { realPath: string }) | undefined;
    try {
      existing = await this.fs.stat(path);
    } catch (err) {
      if (!(err instanceof FsError && err.code === 'ENOENT')) throw err;
    }
    if (existing && isDirectory(existing.mode)) throw new FsError('EISDIR', `${filename} is a directory`);
    const create = (flags & OPEN_MODE.CREAT) !== 0;
    if (!existing && !create) throw new FsError('ENOENT', `${filename}: no such file`);
    if (existing && create && (flags & OPEN_MODE.EXCL) !== 0) throw new FsError('EEXIST', `${filename} already exists`);
    const writable = (flags & (OPEN_MODE.WRITE | OPEN_MODE.APPEND)) !== 0 || !existing;
    const truncate = (flags & OPEN_MODE.TRUNC) !== 0;
    const append = (flags & OPEN_MODE.APPEND) !== 0;
    const mode = (attrs.mode ?? existing?.mode ?? 0o644) & 0o7777;
    const target = existing?.realPath ?? path;

    if (!writable) {
      this.sftp.handle(id, this.newHandle({ kind: 'read', path: target, stat: existing! }));
      return;
    }
    if (await this.hasShell()) {
      await this.pace('exec');
      await ContainerFileWriter.prepare(this.docker, this.entry.containerId, target, { truncate, ...(existing ? {} : { createMode: mode }) });
      const kept = existing !== undefined && !truncate;
      const state: WriteHandleState = { kind: 'write', path: target, append, keptSize: kept ? existing!.size : 0, start: 'append', appended: 0, mode };
      if (!kept && !append) state.order = new WriteOrder(0, this.limits.reorderWindowBytes);
      this.sftp.handle(id, this.newHandle(state));
      return;
    }
    await this.openStaged(id, target, existing, { truncate, append, mode });
  }

  private async openStaged(id: number, path: string, existing: FileStat | undefined, how: { truncate: boolean; append: boolean; mode: number }): Promise<void> {
    const keep = existing !== undefined && !how.truncate;
    if (keep && existing!.size > this.limits.stageLimitBytes) throw this.stageLimitError(path);
    const reserved = keep ? existing!.size : 0;
    if (!this.takeStaging(reserved)) throw this.stageBudgetError(path);
    let stagedPath: string;
    try {
      stagedPath = join(await this.stagingDir(), randomBytes(8).toString('hex'));
    } catch (err) {
      this.budgets?.staged.give(reserved);
      throw err;
    }
    let staged: FileHandle;
    try {
      if (keep) {
        const sink = createWriteStream(stagedPath, { mode: 0o600 });
        const flushed = once(sink, 'close');
        try {
          await this.fs.readFile(path, sink);
          await flushed;
        } catch (err) {
          sink.destroy();
          throw err;
        }
      }
      staged = await open(stagedPath, keep ? 'r+' : 'w+', 0o600);
    } catch (err) {
      this.budgets?.staged.give(reserved);
      await rm(stagedPath, { force: true });
      throw err;
    }
    const state: StageHandleState = { kind: 'stage', path, staged, stagedPath, reserved, writable: true, append: how.append, dirty: !keep, mode: how.mode };
    this.sftp.handle(id, this.newHandle(state));
  }

  private takeStaging(bytes: number): boolean {
    return bytes === 0 || !this.budgets || this.budgets.staged.take(bytes);
  }

  /** Grows what `state` holds of the budget to `size`, when it is more than it holds. */
  private reserveStaged(state: StageHandleState, size: number): void {
    if (size <= state.reserved) return;
    if (!this.takeStaging(size - state.reserved)) throw this.stageBudgetError(state.path);
    state.reserved = size;
  }

  private stageBudgetError(path: string): FsError {
    return new FsError('EUNSUPPORTED', `${path}: this instance's uploads already hold the ${this.budgets!.staged.limit} bytes they may stage on the node at once (its image has no /bin/sh to stream them through); close some and retry`);
  }

  private stageLimitError(path: string): FsError {
    return new FsError('EUNSUPPORTED', `${path}: this instance's image has no /bin/sh to stream files through, so writes are staged on the node, up to ${this.limits.stageLimitBytes} bytes a file`);
  }

  /** Waits out what `bytes` cost the instance's share of the gateway (bytes the engine sends that the client never gets). */
  private readonly paced = (bytes: number): Promise<void> => pause(this.throttle()?.out.take(bytes) ?? 0);

  private async read(id: number, handle: Buffer, offset: number, length: number): Promise<void> {
    const state = this.fileHandle(handle);
    if (state.kind === 'write') throw new FsError('EUNSUPPORTED', 'a file opened for writing cannot be read here; open it again for reading');
    const want = Math.min(length, MAX_READ);
    if (state.kind === 'stage') {
      const buffer = Buffer.alloc(want);
      const { bytesRead } = await state.staged.read(buffer, 0, buffer.length, offset);
      if (bytesRead === 0) this.sftp.status(id, STATUS_CODE.EOF);
      else this.sftp.data(id, buffer.subarray(0, bytesRead));
      return;
    }
    clearTimeout(state.idle);
    // A read behind the stream's position starts the stream over (clients read in order).
    if (state.reader && offset < state.reader.position) {
      await state.reader.close();
      state.reader = undefined;
    }
    state.reader ??= new ByteReader(this.fs.streamFile(state.path));
    const reader = state.reader;
    // The engine streams a file from its start: a read far ahead makes it send (and the agent
    // drop) everything before, so what is skipped is paid from the instance's share of the
    // gateway as if it had been sent. Else a client alternating between a big file's end and
    // its start would keep dockerd streaming at every other tenant's expense.
    const skipped = await reader.skip(offset - reader.position, this.paced);
    const data = skipped ? await reader.read(want) : Buffer.alloc(0);
    if (data.length === 0) this.sftp.status(id, STATUS_CODE.EOF);
    else this.sftp.data(id, data);
    state.idle = setTimeout(() => {
      if (state.reader !== reader) return;
      state.reader = undefined;
      reader.close().catch(() => undefined);
    }, READER_IDLE_MS);
    state.idle.unref();
  }

  private async write(id: number, handle: Buffer, offset: number, data: Buffer): Promise<void> {
    const state = this.fileHandle(handle);
    if (state.kind === 'read') throw new FsError('EACCES', 'the file was opened for reading');
    if (state.kind === 'stage') {
      const position = state.append ? (await state.staged.stat()).size : offset;
      if (position + data.length > this.limits.stageLimitBytes) throw this.stageLimitError(state.path);
      this.reserveStaged(state, position + data.length);
      await state.staged.write(data, 0, data.length, position);
      state.dirty = true;
      return this.ok(id);
    }
    if (state.append) {
      await this.streamTo(state, [data]);
      state.appended += data.length;
      return this.ok(id);
    }
    if (!state.order) {
      // A kept file: where the first write lands says how the stream starts.
      if (offset === 0) state.start = 'overwrite';
      else if (offset !== state.keptSize) {
        throw new FsError('EUNSUPPORTED', `a write at offset ${offset} into an existing file of ${state.keptSize} bytes: uploads stream into the instance, from the start or from the end of a file`);
      }
      state.order = new WriteOrder(offset, this.limits.reorderWindowBytes);
    }
    const verdict = state.order.offer(offset, data);
    if (!verdict.ok) throw new FsError('EUNSUPPORTED', verdict.reason);
    await this.streamTo(state, verdict.flush);
    this.ok(id);
  }

  /** Streams chunks into the file, starting the writer on first use (or again after a flush). */
  private async streamTo(state: WriteHandleState, chunks: Buffer[]): Promise<void> {
    if (chunks.length === 0) return;
    if (!state.writer) {
      if (state.start === 'overwrite' && state.order && state.order.next > 0) {
        throw new FsError('EUNSUPPORTED', 'writing on after the file\'s times were set, in the middle of an existing file, is not supported');
      }
      await this.pace('exec');
      state.writer = await ContainerFileWriter.open(this.docker, this.entry.containerId, state.path, state.start);
    }
    for (const chunk of chunks) await state.writer.write(chunk);
  }

  /** Ends the handle's stream, so what was written is in the file. */
  private async flush(state: WriteHandleState): Promise<void> {
    const writer = state.writer;
    if (!writer) return;
    state.writer = undefined;
    await writer.finish();
    // A later write appends to what is there now.
    if (state.start === 'overwrite' && (state.order?.next ?? 0) >= state.keptSize) state.start = 'append';
  }

  private writtenSize(state: WriteHandleState): number {
    return state.append ? state.keptSize + state.appended : Math.max(state.keptSize, state.order?.next ?? 0);
  }

  private async fstat(id: number, handle: Buffer): Promise<void> {
    const state = this.fileHandle(handle);
    if (state.kind === 'read') return this.sftp.attrs(id, attrsOf(state.stat));
    if (state.kind === 'write') {
      return this.sftp.attrs(id, attrsOf({ name: posix.basename(state.path), mode: 0o100000 | state.mode, size: this.writtenSize(state), mtime: Math.floor(Date.now() / 1000) }));
    }
    const size = (await state.staged.stat()).size;
    this.sftp.attrs(id, attrsOf({ name: posix.basename(state.path), mode: 0o100000 | state.mode, size, mtime: state.mtime ?? Math.floor(Date.now() / 1000) }));
  }

  private async fsetstat(id: number, handle: Buffer, attrs: Partial<Attributes>): Promise<void> {
    const state = this.fileHandle(handle);
    if (state.kind === 'read') return this.setstat(id, state.path, attrs);
    if (state.kind === 'write') {
      if (attrs.uid !== undefined || attrs.gid !== undefined) throw new FsError('EUNSUPPORTED', 'the owner of a file cannot be changed here');
      if (attrs.size !== undefined && attrs.size !== this.writtenSize(state)) {
        throw new FsError('EUNSUPPORTED', `truncating to ${attrs.size} bytes is not supported while the file is streamed (it has ${this.writtenSize(state)})`);
      }
      if (attrs.mode !== undefined) {
        state.mode = attrs.mode & 0o7777;
        await this.fs.chmod(state.path, state.mode);
      }
      if (attrs.mtime !== undefined) {
        // The bytes still in the pipe would move the time again: let them land first.
        await this.flush(state);
        await this.fs.setMtime(state.path, attrs.mtime);
      }
      return this.ok(id);
    }
    if (attrs.mode !== undefined) state.mode = attrs.mode & 0o7777;
    if (attrs.mtime !== undefined) state.mtime = attrs.mtime;
    if (attrs.size !== undefined) {
      if (attrs.size > this.limits.stageLimitBytes) throw this.stageLimitError(state.path);
      this.reserveStaged(state, attrs.size);
      await state.staged.truncate(attrs.size);
    }
    state.dirty = true;
    this.ok(id);
  }

  private async setstat(id: number, path: string, attrs: Partial<Attributes>): Promise<void> {
    if (attrs.size !== undefined || attrs.uid !== undefined || attrs.gid !== undefined) {
      throw new FsError('EUNSUPPORTED', 'only the mode and times of an existing file can be changed here; re-upload it to change more');
    }
    if (attrs.mode !== undefined) await this.fs.chmod(path, attrs.mode);
    // Times: with the image's `touch` when it has one; the archive API cannot set them.
    if (attrs.mtime !== undefined && (await this.hasShell())) await this.fs.setMtime(path, attrs.mtime);
    this.ok(id);
  }

  private async close(id: number, handle: Buffer): Promise<void> {
    const state = this.handleOf(handle);
    this.handles.delete(handle.toString('hex'));
    if (state.kind === 'dir') {
      this.budgets?.listings.give(state.held);
      return this.ok(id);
    }
    if (state.kind === 'read') {
      clearTimeout(state.idle);
      await state.reader?.close();
      return this.ok(id);
    }
    if (state.kind === 'write') {
      await this.flush(state);
      const hole = state.order?.hole;
      if (hole !== undefined) throw new FsError('EIO', `the upload has a hole at offset ${hole}: ${state.order!.waiting} bytes written after it never reached the file`);
      return this.ok(id);
    }
    try {
      if (state.dirty) {
        const size = (await state.staged.stat()).size;
        await this.fs.writeFile(state.path, createReadStream(state.stagedPath), size, { mode: state.mode, ...(state.mtime !== undefined ? { mtime: state.mtime } : {}) });
      }
    } finally {
      await state.staged.close();
      await rm(state.stagedPath, { force: true });
      this.budgets?.staged.give(state.reserved);
    }
    this.ok(id);
  }

  private async opendir(id: number, path: string): Promise<void> {
    const entries = await this.fs.readDir(this.resolve(path), this.paced);
    const listed = entries.map((e) => ({ filename: e.name, longname: longName(e), attrs: attrsOf(e) }));
    const held = listed.reduce((sum, e) => sum + listedBytes(e), 0);
    if (this.budgets && !this.budgets.listings.take(held)) {
      throw new FsError('EUNSUPPORTED', `${path}: this instance's SFTP sessions already hold the directory listings they may keep open at once (${this.budgets.listings.limit} bytes); close some and retry`);
    }
    try {
      this.sftp.handle(id, this.newHandle({ kind: 'dir', entries: listed, held }));
    } catch (err) {
      this.budgets?.listings.give(held);
      throw err;
    }
  }

  private readdir(id: number, handle: Buffer): void {
    const state = this.handleOf(handle);
    if (state.kind !== 'dir') throw new FsError('ENOTDIR', 'not a directory handle');
    if (state.entries.length === 0) return this.sftp.status(id, STATUS_CODE.EOF);
    this.sftp.name(id, state.entries.splice(0, NAMES_PER_REPLY));
  }

  private fileHandle(handle: Buffer): ReadHandleState | WriteHandleState | StageHandleState {
    const state = this.handleOf(handle);
    if (state.kind === 'dir') throw new FsError('EISDIR', 'not a file handle');
    return state;
  }

  /** The channel is gone: stop every stream, remove staged files. What was written stays, as with sshd. */
  private async cleanUp(): Promise<void> {
    for (const state of this.handles.values()) {
      if (state.kind === 'stage') {
        await state.staged.close().catch(() => undefined);
        this.budgets?.staged.give(state.reserved);
      }
      if (state.kind === 'read') {
        clearTimeout(state.idle);
        await state.reader?.close().catch(() => undefined);
      }
      if (state.kind === 'write') state.writer?.abort();
      if (state.kind === 'dir') this.budgets?.listings.give(state.held);
    }
    this.handles.clear();
    if (this.staging) await rm(await this.staging, { recursive: true, force: true });
  }
}

function statusOf(err: unknown): number {
  if (!(err instanceof FsError)) return STATUS_CODE.FAILURE;
  switch (err.code) {
    case 'ENOENT':
      return STATUS_CODE.NO_SUCH_FILE;
    case 'EACCES':
      return STATUS_CODE.PERMISSION_DENIED;
    case 'EUNSUPPORTED':
      return STATUS_CODE.OP_UNSUPPORTED;
    default:
      return STATUS_CODE.FAILURE;
  }
}
