// A tenant starting a new flow for each of N loopback address and port pairs in its own
// network namespace, one UDP datagram each: `conntrack-fill N` prints "sent <n>".
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

int main(int argc, char **argv) {
  long want = argc > 1 ? atol(argv[1]) : 10000, sent = 0;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in to = {0};
  to.sin_family = AF_INET;
  for (long i = 0; i < want; i++) {
    to.sin_addr.s_addr = htonl(0x7f000000 + 1 + (uint32_t)(i / 60000)); // 127.0.0.x
    to.sin_port = htons(1024 + (i % 60000));
    if (sendto(s, "x", 1, 0, (struct sockaddr *)&to, sizeof to) == 1) sent++;
  }
  printf("sent %ld\n", sent);
  return 0;
}
