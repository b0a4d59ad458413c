// -fnon-call-exceptions: a SIGSEGV handler throws; the exception leaves the handler through
// the signal trampoline's frame into the faulting function and further up. The handler is
// SA_NODEFER, then not: what the signal mask is after the catch is printed (libgcc leaves it as
// the handler had it: the unwinder does not restore it).
#include <csignal>
#include <cstdio>
#include <stdexcept>

struct Noisy {
  int n;
  ~Noisy() { std::printf("  ~Noisy %d\n", n); }
};

extern "C" void on_segv(int) {
  throw std::runtime_error("segfault");
}

__attribute__((noinline)) int fault(volatile int* p) {
  Noisy n{2};
  return *p;
}

__attribute__((noinline)) int catches_own_fault(volatile int* p) {
  try {
    return *p + 1;
  } catch (const std::runtime_error& e) {
    std::printf("  caught in the faulting function: %s\n", e.what());
    return -1;
  }
}

static void print_mask() {
  sigset_t now;
  sigprocmask(SIG_BLOCK, nullptr, &now);
  std::printf("  SIGSEGV %s\n", sigismember(&now, SIGSEGV) ? "blocked" : "not blocked");
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  struct sigaction sa = {};
  sa.sa_handler = on_segv;
  sa.sa_flags = SA_NODEFER;
  sigaction(SIGSEGV, &sa, nullptr);
  for (int round = 0; round < 3; ++round) {
    try {
      Noisy n{1};
      fault(nullptr);
    } catch (const std::runtime_error& e) {
      std::printf("caught %s\n", e.what());
    }
    print_mask();
    std::printf("returned %d\n", catches_own_fault(nullptr));
    print_mask();
  }
  // On an alternate signal stack: the throw starts there, the handler is on the thread's stack.
  static char alt[1 << 16];
  stack_t ss = {};
  ss.ss_sp = alt;
  ss.ss_size = sizeof alt;
  sigaltstack(&ss, nullptr);
  sa.sa_flags = SA_NODEFER | SA_ONSTACK;
  sigaction(SIGSEGV, &sa, nullptr);
  for (int round = 0; round < 2; ++round) {
    try {
      Noisy n{3};
      fault(nullptr);
    } catch (const std::runtime_error& e) {
      std::printf("caught %s from the alternate stack\n", e.what());
    }
    std::printf("returned %d\n", catches_own_fault(nullptr));
  }
  // Without SA_NODEFER SIGSEGV is blocked in the handler; a catch in the faulting function
  // itself (the frame the signal interrupted) leaves it so, as libgcc does.
  sa.sa_flags = 0;
  sigaction(SIGSEGV, &sa, nullptr);
  std::printf("returned %d\n", catches_own_fault(nullptr));
  print_mask();
  return 0;
}
