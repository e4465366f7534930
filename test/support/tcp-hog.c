// A tenant queueing data in TCP sockets it never reads: connected pairs on loopback inside
// its own container, each written to until the kernel takes no more (or `stop` MiB in
// all), prints "<MiB queued>", then holds them for as many seconds as its last argument
// says. Socket buffers are kernel memory; whose memory they count against is the question.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
  int pairs = argc > 1 ? atoi(argv[1]) : 100;
  long long stop = (argc > 2 ? atoll(argv[2]) : 1024) * 1024LL * 1024LL;
  int hold = argc > 3 ? atoi(argv[3]) : 0;
  struct sockaddr_in addr = {0};
  socklen_t len = sizeof addr;
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0 || bind(listener, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(listener, 4096) < 0 ||
      getsockname(listener, (struct sockaddr *)&addr, &len) < 0) {
    perror("listen");
    return 1;
  }
  static char chunk[65536];
  long long queued = 0;
  for (int i = 0; i < pairs && queued < stop; i++) {
    int client = socket(AF_INET, SOCK_STREAM, 0);
    if (client < 0 || connect(client, (struct sockaddr *)&addr, sizeof addr) < 0) break;
    if (accept(listener, NULL, NULL) < 0) break;
    fcntl(client, F_SETFL, O_NONBLOCK);
    for (;;) {
      ssize_t n = write(client, chunk, sizeof chunk);
      if (n <= 0) break;
      queued += n;
      if (queued >= stop) break;
    }
  }
  printf("%lld\n", queued / (1024 * 1024));
  fflush(stdout);
  if (hold > 0) sleep((unsigned)hold);
  return 0;
}
