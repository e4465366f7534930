// A tenant holding datagrams in UDP sockets it never reads: receivers on loopback inside
// its own container, each sent datagrams until its buffer takes no more, until `stop` MiB
// are held in all (the kernel's own count, SO_MEMINFO) or `sockets` were made; prints
// "<MiB held>", then holds them for as many seconds as its last argument says.
#include <arpa/inet.h>
#include <fcntl.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SO_MEMINFO
#define SO_MEMINFO 55
#endif

static long long held(int fd) {
  unsigned int info[SK_MEMINFO_VARS] = {0};
  socklen_t len = sizeof info;
  if (getsockopt(fd, SOL_SOCKET, SO_MEMINFO, info, &len) < 0) return 0;
  return info[SK_MEMINFO_RMEM_ALLOC];
}

int main(int argc, char **argv) {
  int sockets = argc > 1 ? atoi(argv[1]) : 1000;
  long long stop = (argc > 2 ? atoll(argv[2]) : 1024) * 1024LL * 1024LL;
  int hold = argc > 3 ? atoi(argv[3]) : 0;
  int tx = socket(AF_INET, SOCK_DGRAM, 0);
  fcntl(tx, F_SETFL, O_NONBLOCK);
  static char datagram[8192];
  long long total = 0;
  for (int i = 0; i < sockets && total < stop; i++) {
    int rx = socket(AF_INET, SOCK_DGRAM, 0);
    if (rx < 0) break;
    struct sockaddr_in addr = {0};
    socklen_t len = sizeof addr;
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(rx, (struct sockaddr *)&addr, sizeof addr) < 0 || getsockname(rx, (struct sockaddr *)&addr, &len) < 0) break;
    for (int k = 0; k < 64; k++) sendto(tx, datagram, sizeof datagram, 0, (struct sockaddr *)&addr, sizeof addr);
    total += held(rx);
  }
  printf("%lld\n", total / (1024 * 1024));
  fflush(stdout);
  if (hold > 0) sleep((unsigned)hold);
  return 0;
}
