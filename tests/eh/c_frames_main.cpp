#include <cstdio>
#include <stdexcept>

extern "C" void c_call_back(void (*fn)(int), int depth);

struct Noisy {
  ~Noisy() { std::puts("  ~Noisy"); }
};

extern "C" void throw_from_callback(int depth) {
  Noisy n;
  throw std::runtime_error("through C, depth " + std::to_string(depth));
}

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  try {
    c_call_back(throw_from_callback, 3);
  } catch (const std::exception& e) {
    std::printf("caught %s\n", e.what());
  }
  return 0;
}
