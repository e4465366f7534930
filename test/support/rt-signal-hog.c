// A tenant taking the counts the kernel keeps per user for the whole host, or probing them:
//   rt-signal-hog signals N   queue N real-time signals to itself (blocked), print "ready <queued>", hold them
//   rt-signal-hog queues      create POSIX message queues until refused, print "ready <count>", hold them
//   rt-signal-hog probe       what an ordinary program does: print "timer <ok|errno> sigqueue <ok|errno> mq <ok|errno>"
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *outcome(int failed) { return failed ? strerrorname_np(errno) : "ok"; }

static void hold(void) {
  fflush(stdout);
  for (;;) pause();
}

int main(int argc, char **argv) {
  if (argc >= 3 && strcmp(argv[1], "signals") == 0) {
    long want = atol(argv[2]), n = 0;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN);
    sigprocmask(SIG_BLOCK, &set, NULL);
    union sigval value = {0};
    while (n < want && sigqueue(getpid(), SIGRTMIN, value) == 0) n++;
    printf("ready %ld\n", n);
    hold();
  }
  if (argc >= 2 && strcmp(argv[1], "queues") == 0) {
    long n = 0;
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 10;
    for (long size = 8192; size >= 1;) {
      char name[64];
      snprintf(name, sizeof name, "/hog%ld", n);
      attr.mq_msgsize = size;
      if (mq_open(name, O_CREAT | O_RDWR, 0600, &attr) == (mqd_t)-1) {
        if (errno != EMFILE && errno != ENOMEM) break; // the namespace's queue count, not the budget
        size /= 2;
        continue;
      }
      n++;
    }
    printf("ready %ld\n", n);
    hold();
  }
  if (argc >= 2 && strcmp(argv[1], "probe") == 0) {
    timer_t timer;
    struct sigevent event = {0};
    event.sigev_notify = SIGEV_SIGNAL;
    event.sigev_signo = SIGRTMIN + 1;
    int timerFailed = timer_create(CLOCK_MONOTONIC, &event, &timer) != 0;
    printf("timer %s", outcome(timerFailed));
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMIN + 2);
    sigprocmask(SIG_BLOCK, &set, NULL);
    union sigval value = {0};
    printf(" sigqueue %s", outcome(sigqueue(getpid(), SIGRTMIN + 2, value) != 0));
    struct mq_attr attr = {0};
    attr.mq_maxmsg = 10;
    attr.mq_msgsize = 1024;
    mqd_t q = mq_open("/probe", O_CREAT | O_RDWR, 0600, &attr);
    printf(" mq %s\n", outcome(q == (mqd_t)-1));
    if (q != (mqd_t)-1) mq_unlink("/probe");
    return 0;
  }
  fprintf(stderr, "usage: rt-signal-hog signals N | queues | probe\n");
  return 2;
}
