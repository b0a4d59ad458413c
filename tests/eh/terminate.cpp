// Exceptions that reach std::terminate: argv[1] says how. The run's exit status and stderr
// (libstdc++'s verbose terminate handler) are compared between libgcc_s and libehelf-eh.
#include <cstdio>
#include <cstring>
#include <stdexcept>

struct Noisy {
  ~Noisy() { std::puts("~Noisy"); }
};

__attribute__((noinline)) void thrower() {
  throw std::runtime_error("nobody catches this");
}

__attribute__((noinline)) void no_except() noexcept {
  Noisy n;
  thrower();
}

struct ThrowingDestructor {
  ~ThrowingDestructor() noexcept(false) { throw std::logic_error("second exception"); }
};

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  const char* how = argc > 1 ? argv[1] : "";
  if (!std::strcmp(how, "uncaught")) {
    Noisy n; // not destroyed: no handler, the stack is not unwound
    thrower();
  } else if (!std::strcmp(how, "noexcept")) {
    no_except();
  } else if (!std::strcmp(how, "during_unwind")) {
    try {
      ThrowingDestructor t;
      thrower();
    } catch (...) {
      std::puts("not reached");
    }
  }
  return 0;
}
