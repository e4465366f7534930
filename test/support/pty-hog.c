// A tenant taking pseudo-terminals: opens /dev/ptmx until the kernel refuses, prints
// "<opened> <errno name>", then holds them all for as many seconds as its argument says.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int opened = 0;
  int err = 0;
  for (;;) {
    int fd = open("/dev/ptmx", O_RDWR | O_NOCTTY);
    if (fd < 0) {
      err = errno;
      break;
    }
    opened++;
  }
  printf("%d %s\n", opened, err == ENOSPC ? "ENOSPC" : err == EMFILE ? "EMFILE" : strerror(err));
  fflush(stdout);
  if (argc > 1) sleep((unsigned)atoi(argv[1]));
  return 0;
}
