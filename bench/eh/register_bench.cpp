// The __register_frame family's costs, as a JIT pays them, under whichever unwinder the process
// binds (libgcc_s as built, or a preloaded one: bench/run_eh.sh):
//   register_bench register LIVE   ns per __register_frame + __deregister_frame of a one-FDE
//                                  object, with LIVE other objects registered
//   register_bench throw LIVE      ns per throw-and-catch through one registered JIT frame (no
//                                  frame pointer), with LIVE other objects registered
// Each object is registered by its FDE's address (its CIE before it): the one form libgcc_s,
// LLVM's libunwind (which takes one FDE per call) and ehelf all take. Prints the median of 7
// rounds.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <sys/mman.h>
#include <vector>

#include "../../tests/eh/jit_code.hpp"

extern "C" void __register_frame(void*);
extern "C" void __deregister_frame(void*);

extern "C" __attribute__((noinline)) void thrower() {
  throw 1;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const std::string what = argv[1];
  const int live = std::atoi(argv[2]);
  auto* mem = static_cast<uint8_t*>(mmap(nullptr, 1 << 20, PROT_READ | PROT_WRITE | PROT_EXEC,
                                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return 1;
  // LIVE other objects, one function each, 64 bytes apart; the measured one after them.
  std::vector<std::vector<uint8_t>> others;
  for (int i = 0; i < live; ++i) {
    uint8_t* code = mem + 64 * (i + 1);
    std::memcpy(code, kWithout, sizeof kWithout);
    others.push_back(
        eh_frame_for(uint64_t(code), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi));
  }
  for (auto& f : others)
    __register_frame(f.data() + kFdeOffset);
  uint8_t* code = mem;
  std::memcpy(code, kWithout, sizeof kWithout);
  std::vector<uint8_t> mine =
      eh_frame_for(uint64_t(code), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi);
  const bool registering = what == "register";
  if (!registering) __register_frame(mine.data() + kFdeOffset);
  const int per_round = registering ? 2000 : 20000;
  auto round = [&] {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_round; ++i) {
      if (registering) {
        __register_frame(mine.data() + kFdeOffset);
        __deregister_frame(mine.data() + kFdeOffset);
      } else {
        try {
          reinterpret_cast<void (*)(void (*)())>(code)(thrower);
        } catch (int) {
        }
      }
    }
    return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
               .count() /
           per_round;
  };
  round(); // warm-up
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r)
    rounds.push_back(round());
  std::sort(rounds.begin(), rounds.end());
  std::printf("%.1f\n", rounds[3]);
  return 0;
}
