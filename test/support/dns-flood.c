/*
 * A tenant's DNS flood, for tests: sends queries for made-up names to Docker's embedded DNS
 * server (127.0.0.11:53) over one UDP socket as fast as it can for the given seconds,
 * without waiting for answers, then prints how many it tried and how many the kernel took
 * (a packet a netfilter rule drops on the way out fails its sendto with EPERM).
 *   dns-flood SECONDS
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  int s = socket(AF_INET, SOCK_DGRAM, 0);
  if (s < 0) return 1;
  struct sockaddr_in to;
  memset(&to, 0, sizeof to);
  to.sin_family = AF_INET;
  to.sin_port = htons(53);
  inet_pton(AF_INET, "127.0.0.11", &to.sin_addr);
  time_t end = time(NULL) + atoi(argv[1]);
  long tried = 0, sent = 0;
  unsigned char q[64];
  while (time(NULL) < end) {
    for (int i = 0; i < 1000; i++, tried++) {
      /* Header: id, recursion desired, one question; then <8 hex>.invalid, type A, class IN. */
      memset(q, 0, 12);
      q[0] = (unsigned char)(tried >> 8);
      q[1] = (unsigned char)tried;
      q[2] = 1;
      q[5] = 1;
      int len = 12 + snprintf((char *)q + 12, 40, "%c%08lx%cinvalid", 8, tried & 0xffffffffL, 7);
      q[len++] = 0;
      q[len++] = 0;
      q[len++] = 1;
      q[len++] = 0;
      q[len++] = 1;
      if (sendto(s, q, len, 0, (struct sockaddr *)&to, sizeof to) == len) sent++;
    }
  }
  printf("%ld %ld\n", tried, sent);
  return 0;
}
