// A tenant taking pipe buffers, which the kernel counts per user (every container is root):
//   pipe-hog hold <pipes> <fill>  makes <pipes> pipes of 1 MiB each and, with <fill> 1, fills
//                                 them; prints "ready <made>" (or "refused <made> <errno>")
//                                 and holds them until killed
//   pipe-hog probe                prints "<bytes a new pipe holds> <growing it to 1 MiB: ok or errno>"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MIB (1 << 20)

static char chunk[65536];

static const char *errname(int err) { return err == EPERM ? "EPERM" : err == ENOMEM ? "ENOMEM" : strerror(err); }

int main(int argc, char **argv) {
  int fd[2];
  if (argc == 2 && strcmp(argv[1], "probe") == 0) {
    if (pipe(fd) < 0) return 1;
    int size = fcntl(fd[0], F_GETPIPE_SZ);
    int grown = fcntl(fd[0], F_SETPIPE_SZ, MIB);
    printf("%d %s\n", size, grown < 0 ? errname(errno) : "ok");
    return 0;
  }
  if (argc != 4 || strcmp(argv[1], "hold") != 0) return 2;
  long pipes = atol(argv[2]), made = 0;
  int fill = atoi(argv[3]), err = 0;
  for (; made < pipes; made++) {
    if (pipe2(fd, O_NONBLOCK) < 0 || fcntl(fd[1], F_SETPIPE_SZ, MIB) < 0) {
      err = errno;
      break;
    }
    for (long written = 0; fill && written < MIB;) {
      ssize_t n = write(fd[1], chunk, sizeof chunk);
      if (n <= 0) break;
      written += n;
    }
  }
  if (err) printf("refused %ld %s\n", made, errname(err));
  else printf("ready %ld\n", made);
  fflush(stdout);
  for (;;) pause();
}
