// A tenant pinning memory through io_uring, which the kernel counts against one per-user
// budget (RLIMIT_MEMLOCK of user->locked_vm; every container is root):
//   io-uring-hog hold         makes a ring and registers a fixed buffer of all its
//                             RLIMIT_MEMLOCK but 8 KiB; prints "ready" (or "refused <step>
//                             <errno>", or "unlimited": no budget to take) and holds it until killed
//   io-uring-hog probe        makes a ring of 8 entries and registers a 64 KiB buffer:
//                             prints "ok", or "refused <step> <errno>"
#define _GNU_SOURCE
#include <errno.h>
#include <linux/io_uring.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

static const char *errname(int err) { return err == EPERM ? "EPERM" : err == ENOMEM ? "ENOMEM" : err == ENOSYS ? "ENOSYS" : strerror(err); }

static int ring_with_buffer(size_t bytes) {
  struct io_uring_params params;
  memset(&params, 0, sizeof params);
  int fd = (int)syscall(__NR_io_uring_setup, 8, &params);
  if (fd < 0) {
    printf("refused setup %s\n", errname(errno));
    return -1;
  }
  void *buffer = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buffer == MAP_FAILED) return -1;
  memset(buffer, 1, bytes);
  struct iovec iov = { .iov_base = buffer, .iov_len = bytes };
  if (syscall(__NR_io_uring_register, fd, IORING_REGISTER_BUFFERS, &iov, 1) < 0) {
    printf("refused register %s\n", errname(errno));
    return -1;
  }
  return fd;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc == 2 && strcmp(argv[1], "probe") == 0) {
    if (ring_with_buffer(64 * 1024) < 0) return 0;
    printf("ok\n");
    return 0;
  }
  if (argc != 2 || strcmp(argv[1], "hold") != 0) return 2;
  struct rlimit limit;
  if (getrlimit(RLIMIT_MEMLOCK, &limit) < 0 || limit.rlim_cur == RLIM_INFINITY) {
    printf("unlimited\n");
    pause();
    return 0;
  }
  if (ring_with_buffer((size_t)limit.rlim_cur - 8 * 1024) < 0) {
    pause();
    return 0;
  }
  printf("ready\n");
  pause();
  return 0;
}
