// A tenant adding to the kernel's per-user counts: epoll watches or inotify watches.
//   kernel-counts epoll   <instances> <targets> <watch>   each of <targets> eventfds in each epoll instance
//   kernel-counts inotify <instances> <files>   <watch>   each of <files> files in /tmp in each inotify instance
// With <watch> 0 it makes the same instances, descriptors and files and adds no watch, so
// the difference in the container's memory is what the watches cost. Prints
// "ready <watches added>" (or "refused <added> <errno>") and waits to be killed.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

static void done(const char *word, long added, int err) {
  if (err) printf("%s %ld %s\n", word, added, strerror(err));
  else printf("%s %ld\n", word, added);
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc != 5) return 2;
  int epoll = strcmp(argv[1], "epoll") == 0, instances = atoi(argv[2]), targets = atoi(argv[3]), watch = atoi(argv[4]);
  int *inst = calloc(instances, sizeof(int)), *target = calloc(targets, sizeof(int));
  char path[64];
  for (int i = 0; i < instances; i++) if ((inst[i] = epoll ? epoll_create1(0) : inotify_init1(0)) < 0) done("refused", 0, errno);
  for (int j = 0; j < targets; j++) {
    if (epoll) target[j] = eventfd(0, 0);
    else {
      snprintf(path, sizeof path, "/tmp/f%d", j);
      target[j] = open(path, O_CREAT | O_WRONLY, 0600);
      if (target[j] >= 0) close(target[j]);
    }
    if (target[j] < 0) done("refused", 0, errno);
  }
  long added = 0;
  for (int i = 0; watch && i < instances; i++)
    for (int j = 0; j < targets; j++) {
      int rc;
      if (epoll) {
        struct epoll_event e = {.events = EPOLLIN, .data.fd = target[j]};
        rc = epoll_ctl(inst[i], EPOLL_CTL_ADD, target[j], &e);
      } else {
        snprintf(path, sizeof path, "/tmp/f%d", j);
        rc = inotify_add_watch(inst[i], path, IN_MODIFY);
      }
      if (rc < 0) done("refused", added, errno);
      added++;
    }
  done("ready", added, 0);
}
