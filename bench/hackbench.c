/* A small hackbench (the scheduler benchmark of the Linux kernel tree, also `perf bench sched
 * messaging`): GROUPS groups of SENDERS sender and as many receiver threads. Within a group every
 * sender writes LOOPS messages of 100 bytes to every receiver over a socketpair; each receiver
 * reads SENDERS * LOOPS messages. Prints the elapsed time. bench/bench_compile.sh builds it when
 * perf is not installed, as the "hackbench" program whose unwind tables it compiles.
 *
 * Usage: hackbench [GROUPS [LOOPS [SENDERS]]]   (defaults 10 100 20)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MESSAGE_SIZE 100

struct receiver {
  int fd;                   /* the receiving end of its socketpair */
  unsigned long expected;   /* bytes to read */
};

struct sender {
  const int* fds;           /* the sending ends, one per receiver of the group */
  int nfds;
  int loops;
};

static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t start_cond = PTHREAD_COND_INITIALIZER;
static int started;

static void wait_for_start(void) {
  pthread_mutex_lock(&start_lock);
  while (!started) pthread_cond_wait(&start_cond, &start_lock);
  pthread_mutex_unlock(&start_lock);
}

static void fail(const char* what) {
  fprintf(stderr, "hackbench: %s: %s\n", what, strerror(errno));
  exit(1);
}

static void* send_messages(void* arg) {
  const struct sender* s = arg;
  char data[MESSAGE_SIZE];
  memset(data, '-', sizeof data);
  wait_for_start();
  for (int i = 0; i < s->loops; i++)
    for (int j = 0; j < s->nfds; j++) {
      size_t done = 0;
      while (done < sizeof data) {
        ssize_t n = write(s->fds[j], data + done, sizeof data - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail("write");
        done += (size_t)n;
      }
    }
  return NULL;
}

static void* receive_messages(void* arg) {
  struct receiver* r = arg;
  char data[MESSAGE_SIZE * 4];
  wait_for_start();
  while (r->expected > 0) {
    ssize_t n = read(r->fd, data, r->expected < sizeof data ? r->expected : sizeof data);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("read");
    r->expected -= (unsigned long)n;
  }
  return NULL;
}

static int parse(const char* s, int fallback) {
  if (!s) return fallback;
  int v = atoi(s);
  return v > 0 ? v : fallback;
}

int main(int argc, char** argv) {
  int groups = parse(argc > 1 ? argv[1] : NULL, 10);
  int loops = parse(argc > 2 ? argv[2] : NULL, 100);
  int senders = parse(argc > 3 ? argv[3] : NULL, 20);
  int per_group = 2 * senders;
  pthread_t* threads = calloc((size_t)(groups * per_group), sizeof *threads);
  struct receiver* receivers = calloc((size_t)(groups * senders), sizeof *receivers);
  struct sender* sender_args = calloc((size_t)(groups * senders), sizeof *sender_args);
  int* send_fds = calloc((size_t)(groups * senders), sizeof *send_fds);
  if (!threads || !receivers || !sender_args || !send_fds) fail("calloc");

  int t = 0;
  for (int g = 0; g < groups; g++) {
    for (int r = 0; r < senders; r++) {
      int sv[2];
      if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) fail("socketpair");
      struct receiver* rec = &receivers[g * senders + r];
      rec->fd = sv[0];
      rec->expected = (unsigned long)senders * (unsigned long)loops * MESSAGE_SIZE;
      send_fds[g * senders + r] = sv[1];
      if (pthread_create(&threads[t++], NULL, receive_messages, rec) != 0) fail("pthread_create");
    }
    for (int s = 0; s < senders; s++) {
      struct sender* snd = &sender_args[g * senders + s];
      snd->fds = &send_fds[g * senders];
      snd->nfds = senders;
      snd->loops = loops;
      if (pthread_create(&threads[t++], NULL, send_messages, snd) != 0) fail("pthread_create");
    }
  }

  struct timespec begin, end;
  clock_gettime(CLOCK_MONOTONIC, &begin);
  pthread_mutex_lock(&start_lock);
  started = 1;
  pthread_cond_broadcast(&start_cond);
  pthread_mutex_unlock(&start_lock);
  for (int i = 0; i < t; i++) pthread_join(threads[i], NULL);
  clock_gettime(CLOCK_MONOTONIC, &end);

  printf("%d groups of %d senders and %d receivers, %d loops\n", groups, senders, senders, loops);
  printf("Time: %.3f\n",
         (double)(end.tv_sec - begin.tv_sec) + (double)(end.tv_nsec - begin.tv_nsec) / 1e9);
  for (int i = 0; i < groups * senders; i++) {
    close(receivers[i].fd);
    close(send_fds[i]);
  }
  free(threads);
  free(receivers);
  free(sender_args);
  free(send_fds);
  return 0;
}
