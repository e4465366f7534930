// File modes between Docker and SFTP: Docker's path stat reports Go's os.FileMode (type
// in the high bits), tar headers carry POSIX permission bits plus an entry type, and SFTP
// wants POSIX st_mode (S_IFMT type + permissions).

export const S_IFMT = 0o170000;
export const S_IFSOCK = 0o140000;
export const S_IFLNK = 0o120000;
export const S_IFREG = 0o100000;
export const S_IFBLK = 0o060000;
export const S_IFDIR = 0o040000;
export const S_IFCHR = 0o020000;
export const S_IFIFO = 0o010000;

const GO_DIR = 2 ** 31;
const GO_SYMLINK = 2 ** 27;
const GO_DEVICE = 2 ** 26;
const GO_NAMED_PIPE = 2 ** 25;
const GO_SOCKET = 2 ** 24;
const GO_SETUID = 2 ** 23;
const GO_SETGID = 2 ** 22;
const GO_CHAR_DEVICE = 2 ** 21;
const GO_STICKY = 2 ** 20;

const has = (mode: number, bit: number): boolean => Math.floor(mode / bit) % 2 === 1;

/** Go os.FileMode (as Docker's X-Docker-Container-Path-Stat reports it) -> POSIX st_mode. */
export function posixModeFromGo(goMode: number): number {
  let type = S_IFREG;
  if (has(goMode, GO_DIR)) type = S_IFDIR;
  else if (has(goMode, GO_SYMLINK)) type = S_IFLNK;
  else if (has(goMode, GO_NAMED_PIPE)) type = S_IFIFO;
  else if (has(goMode, GO_SOCKET)) type = S_IFSOCK;
  else if (has(goMode, GO_DEVICE)) type = has(goMode, GO_CHAR_DEVICE) ? S_IFCHR : S_IFBLK;
  let special = 0;
  if (has(goMode, GO_SETUID)) special |= 0o4000;
  if (has(goMode, GO_SETGID)) special |= 0o2000;
  if (has(goMode, GO_STICKY)) special |= 0o1000;
  return type | special | (goMode % 0o1000);
}

const TAR_TYPES: Record<string, number> = {
  file: S_IFREG,
  link: S_IFREG,
  symlink: S_IFLNK,
  directory: S_IFDIR,
  'character-device': S_IFCHR,
  'block-device': S_IFBLK,
  fifo: S_IFIFO,
};

/** A tar entry's type and permission bits -> POSIX st_mode. */
export function posixModeFromTar(type: string | null | undefined, mode: number | undefined): number {
  return (TAR_TYPES[type ?? 'file'] ?? S_IFREG) | ((mode ?? 0o644) & 0o7777);
}

export const isDirectory = (mode: number): boolean => (mode & S_IFMT) === S_IFDIR;
export const isSymlink = (mode: number): boolean => (mode & S_IFMT) === S_IFLNK;

/** `ls -l`-style mode string, for SFTP's long names: drwxr-xr-x. */
export function modeString(mode: number): string {
  const type = { [S_IFDIR]: 'd', [S_IFLNK]: 'l', [S_IFCHR]: 'c', [S_IFBLK]: 'b', [S_IFIFO]: 'p', [S_IFSOCK]: 's' }[mode & S_IFMT] ?? '-';
  const rwx = (bits: number, special: boolean, specialChar: string): string =>
    `${bits & 4 ? 'r' : '-'}${bits & 2 ? 'w' : '-'}${special ? (bits & 1 ? specialChar : specialChar.toUpperCase()) : bits & 1 ? 'x' : '-'}`;
  return (
    type +
    rwx((mode >> 6) & 7, (mode & 0o4000) !== 0, 's') +
    rwx((mode >> 3) & 7, (mode & 0o2000) !== 0, 's') +
    rwx(mode & 7, (mode & 0o1000) !== 0, 't')
  );
}
