// svc-log-init: the first process of an instance's container.
//
// Docker copies whatever a container prints into its log outside the container's CPU
// quota (the containerd shim and dockerd's log driver run on the host): a tenant running
// `yes` keeps dockerd at about a core. This program sits in front of the image's command
// inside the container, so the copying it does is charged to the tenant. It runs the
// command as its child with stdout and stderr on pipes, and copies them to the
// container's own stdout and stderr at most BYTES bytes and LINES lines a second (one
// second of burst). Past that it stops reading: the command's writes block once a pipe
// is full, as they do when Docker's log driver falls behind. Nothing is dropped.
//
// As PID 1 it forwards every signal it can catch to the command, reaps orphans, and,
// once the command has exited, copies what is still in the pipes and exits with the
// command's status (128 + the signal's number when a signal ended it).
//
// Usage: svc-log-init BYTES LINES -- COMMAND [ARG...]
//
// It is also the agent's directory lister, run through `docker exec` for the SFTP server
// (svc-log-init --list-dir DIR): the engine's archive API can only list a directory by
// sending everything under it, file contents included (a directory holding a 2 GiB file
// cost dockerd 2.7 s of CPU per listing). Run as the container's user, it prints one
// record per entry, `MODE SIZE MTIME UID GID NAME\0TARGET\0` (mode in octal; SIZE of
// regular files, else 0; TARGET: a symlink's, else empty), and exits 0; or a message
// and 2 (no such directory), 3 (not a directory), 4 (permission denied), 1 (else).
//
// Static, so it runs in any image (glibc, musl, or none at all).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHUNK 65536

struct bucket {
  double rate;   // per second; also the burst
  double tokens; // may go below zero: a read is taken whole, then paid off
};

struct stream {
  int from; // our end of the command's pipe, -1 once closed
  int to;   // the container's own stdout or stderr
};

static char buffer[CHUNK];

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void refill(struct bucket *b, double elapsed) {
  b->tokens += b->rate * elapsed;
  if (b->tokens > b->rate) b->tokens = b->rate;
}

/** Milliseconds until the bucket holds `needed` tokens; 0 when it does. */
static int wait_ms(const struct bucket *b, double needed) {
  if (b->tokens >= needed) return 0;
  return (int)((needed - b->tokens) / b->rate * 1000.0) + 1;
}

static void write_all(int fd, const char *data, ssize_t length) {
  while (length > 0) {
    ssize_t n = write(fd, data, (size_t)length);
    if (n < 0) {
      if (errno == EINTR) continue;
      return; // nobody reads the container's output any more: drop it, keep the command running
    }
    data += n;
    length -= n;
  }
}

/** Copies one read of the stream; returns the bytes copied, 0 at end of file, -1 when nothing was waiting. */
static ssize_t copy_once(struct stream *s, size_t most) {
  ssize_t n = read(s->from, buffer, most < CHUNK ? most : CHUNK);
  if (n < 0) return (errno == EAGAIN || errno == EINTR) ? -1 : 0;
  if (n > 0) write_all(s->to, buffer, n);
  return n;
}

static long count_lines(ssize_t n) {
  long lines = 0;
  for (ssize_t i = 0; i < n; i++) lines += buffer[i] == '\n';
  return lines;
}

static int parse_rate(const char *text, double *rate) {
  char *end;
  double value = strtod(text, &end);
  if (*text == '\0' || *end != '\0' || !(value >= 1)) return -1;
  *rate = value;
  return 0;
}

static int exit_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

static int list_dir(const char *path) {
  int dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DIR *dir = dir_fd < 0 ? NULL : fdopendir(dir_fd);
  if (!dir) {
    int failure = errno;
    fprintf(stderr, "svc-list-dir: %s: %s\n", path, strerror(failure));
    return failure == ENOENT ? 2 : failure == ENOTDIR ? 3 : failure == EACCES ? 4 : 1;
  }
  static char out[1 << 16];
  setvbuf(stdout, out, _IOFBF, sizeof out);
  static char target[4096];
  struct dirent *entry;
  while ((errno = 0, entry = readdir(dir)) != NULL) {
    const char *name = entry->d_name;
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) continue;
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; // gone meanwhile
    ssize_t length = 0;
    if (S_ISLNK(st.st_mode)) {
      length = readlinkat(dir_fd, name, target, sizeof target);
      if (length < 0) length = 0;
    }
    printf("%o %lld %lld %u %u %s", (unsigned)st.st_mode, S_ISREG(st.st_mode) ? (long long)st.st_size : 0LL, (long long)st.st_mtime,
           (unsigned)st.st_uid, (unsigned)st.st_gid, name);
    putchar('\0');
    fwrite(target, 1, (size_t)length, stdout);
    putchar('\0');
  }
  int failure = errno;
  closedir(dir);
  if (fflush(stdout) != 0 || failure != 0) {
    fprintf(stderr, "svc-list-dir: %s: %s\n", path, strerror(failure ? failure : errno));
    return 1;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--list-dir") == 0) return list_dir(argv[2]);
  struct bucket bytes, lines;
  if (argc < 5 || strcmp(argv[3], "--") != 0 || parse_rate(argv[1], &bytes.rate) || parse_rate(argv[2], &lines.rate)) {
    fprintf(stderr, "usage: svc-log-init BYTES LINES -- COMMAND [ARG...]\n");
    return 2;
  }
  bytes.tokens = bytes.rate;
  lines.tokens = lines.rate;
  // Reads are of a twentieth of a second's bytes (at most a chunk), once that much is
  // allowed: a trickle of small writes costs Docker's copiers far more per byte than the
  // same bytes in a few large ones, and a read of more could pass a second's worth of
  // short lines at once.
  double quantum = bytes.rate / 20 < CHUNK ? bytes.rate / 20 : CHUNK;
  if (quantum < 1) quantum = 1; // a read of 0 bytes would look like the end of the stream
  char **command = argv + 4;

  // Not dumpable: the command runs as the same user, and could otherwise open
  // /proc/1/fd/1 (the container's own stdout) and print around the limit. Opening another
  // process's descriptors then takes CAP_SYS_PTRACE, which containers do not have. The
  // command itself is dumpable again: execve resets the flag.
  prctl(PR_SET_DUMPABLE, 0);

  sigset_t all, previous;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, &previous);

  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
    perror("svc-log-init: pipe");
    return 1;
  }
  pid_t child = fork();
  if (child < 0) {
    perror("svc-log-init: fork");
    return 1;
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &previous, NULL);
    dup2(out[1], STDOUT_FILENO);
    dup2(err[1], STDERR_FILENO);
    execvp(command[0], command);
    int failure = errno;
    fprintf(stderr, "svc-log-init: cannot run %s: %s\n", command[0], strerror(failure));
    _exit(failure == ENOENT ? 127 : 126);
  }
  close(out[1]);
  close(err[1]);
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  int signals = signalfd(-1, &all, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signals < 0) {
    perror("svc-log-init: signalfd");
    return 1;
  }

  struct stream streams[2] = {{out[0], STDOUT_FILENO}, {err[0], STDERR_FILENO}};
  int status = 0, exited = 0, turn = 0;
  double last = now_seconds();
  while (!exited) {
    double now = now_seconds();
    refill(&bytes, now - last);
    refill(&lines, now - last);
    last = now;
    int wait_bytes = wait_ms(&bytes, quantum), wait_lines = wait_ms(&lines, 1);
    int wait = wait_bytes > wait_lines ? wait_bytes : wait_lines;

    struct pollfd fds[3] = {{signals, POLLIN, 0}, {-1, POLLIN, 0}, {-1, POLLIN, 0}};
    for (int i = 0; i < 2; i++) fds[i + 1].fd = wait == 0 ? streams[i].from : -1;
    int timeout = wait > 0 ? wait : -1;
    if (poll(fds, 3, timeout) < 0 && errno != EINTR) {
      perror("svc-log-init: poll");
      return 1;
    }

    turn = !turn; // stdout first, then stderr first: neither starves the other
    for (int k = 0; k < 2; k++) {
      int i = (k + turn) % 2;
      if (fds[i + 1].fd < 0 || !(fds[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      if (bytes.tokens < quantum || lines.tokens < 1) break; // the other stream's read took it: wait
      ssize_t n = copy_once(&streams[i], (size_t)quantum);
      if (n == 0) {
        close(streams[i].from);
        streams[i].from = -1;
      } else if (n > 0) {
        bytes.tokens -= (double)n;
        lines.tokens -= (double)count_lines(n);
      }
    }

    struct signalfd_siginfo info;
    while (read(signals, &info, sizeof info) == sizeof info) {
      if (info.ssi_signo != SIGCHLD) {
        kill(child, (int)info.ssi_signo);
        continue;
      }
      int reaped;
      pid_t pid;
      while ((pid = waitpid(-1, &reaped, WNOHANG)) > 0) {
        if (pid == child) {
          status = exit_status(reaped);
          exited = 1;
        }
      }
    }
  }

  // The command is gone: what it printed last (often why it failed) still goes out,
  // unlimited but bounded: about what the pipes hold, so a process it left behind that
  // keeps printing does not hold the container up.
  for (int i = 0; i < 2; i++) {
    size_t left = 16 * CHUNK;
    ssize_t n;
    while (streams[i].from >= 0 && left > 0 && (n = copy_once(&streams[i], left)) > 0) left -= (size_t)n;
  }
  return status;
}
