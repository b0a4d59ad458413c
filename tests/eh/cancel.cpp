// pthread_cancel and pthread_exit unwind the thread (a forced unwind): destructors run, and
// catch (...) blocks that rethrow see the forced unwind pass through.
#include <cstdio>
#include <pthread.h>
#include <string>
#include <unistd.h>

struct Noisy {
  std::string name;
  explicit Noisy(std::string n) : name(std::move(n)) {}
  ~Noisy() { std::printf("  ~%s\n", name.c_str()); }
};

__attribute__((noinline)) void deep_exit(int depth) {
  Noisy n("exit frame " + std::to_string(depth));
  if (depth == 0) pthread_exit(reinterpret_cast<void*>(7));
  deep_exit(depth - 1);
}

void* exiting(void*) {
  Noisy n("exiting thread");
  try {
    deep_exit(3);
  } catch (...) {
    std::puts("  catch (...) saw the forced unwind, rethrows");
    throw;
  }
  return nullptr;
}

__attribute__((noinline)) void deep_wait(int depth, int fd) {
  Noisy n("cancel frame " + std::to_string(depth));
  if (depth == 0) {
    char c;
    while (read(fd, &c, 1) >= 0) { // a cancellation point; nothing is ever written
    }
  }
  deep_wait(depth - 1, fd);
}

int g_pipe[2];

void* waiting(void*) {
  Noisy n("waiting thread");
  deep_wait(2, g_pipe[0]);
  return nullptr;
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  pthread_t t;
  void* result = nullptr;
  std::puts("pthread_exit");
  pthread_create(&t, nullptr, exiting, nullptr);
  pthread_join(t, &result);
  std::printf("  joined: %ld\n", reinterpret_cast<long>(result));
  std::puts("pthread_cancel");
  if (pipe(g_pipe) != 0) return 1;
  pthread_create(&t, nullptr, waiting, nullptr);
  usleep(100000);
  pthread_cancel(t);
  pthread_join(t, &result);
  std::printf("  joined: %s\n", result == PTHREAD_CANCELED ? "canceled" : "?");
  return 0;
}
