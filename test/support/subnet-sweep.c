/*
 * A tenant sweeping its own subnet, for tests: opens a TCP connection (without waiting for
 * it) to every address of ADDRESS/PREFIX in turn, over and over, for SECONDS, and prints
 * how many it tried. Each address that is nobody's would cost the host a neighbour entry.
 *   subnet-sweep ADDRESS PREFIX SECONDS
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  unsigned prefix = (unsigned)atoi(argv[2]);
  if (prefix < 8 || prefix > 30) return 2;
  unsigned size = 1u << (32 - prefix);
  unsigned base = ntohl(inet_addr(argv[1])) & ~(size - 1);
  time_t end = time(NULL) + atoi(argv[3]);
  long tried = 0;
  while (time(NULL) < end) {
    for (unsigned i = 1; i < size - 1 && time(NULL) < end; i++) {
      int s = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
      if (s < 0) continue;
      struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(80), .sin_addr.s_addr = htonl(base + i)};
      connect(s, (struct sockaddr *)&to, sizeof to);
      close(s);
      tried++;
    }
  }
  printf("%ld\n", tried);
  return 0;
}
