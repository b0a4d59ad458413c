// Throws through JIT code: functions written into executable memory at run time, their FDEs
// registered with the __register_frame family. The callback each calls throws; a destructor
// below it runs, the handler above it catches. Run as built (libgcc_s registers and unwinds)
// and with libehelf-eh preloaded (ours registers and unwinds; glibc's pthread_exit still runs
// libgcc_s's unwinder, which finds the JIT frames through our _Unwind_Find_FDE); the output must
// be the same.
//
//   jit           the family as exported: __register_frame (FDEs on the heap, gigabytes from
//                 the code: a wide search table), __register_frame_info (FDEs beside the code),
//                 __register_frame_info_table, code replaced at the same address after a
//                 deregistration, _Unwind_Backtrace and _Unwind_Find_FDE over JIT frames, threads
//                 throwing through JIT code while another registers and deregisters.
//   jit libgcc    FDEs registered through libgcc_s's own __register_frame and deregistered
//                 through its __deregister_frame (dlvsym): they call __register_frame_info and
//                 __deregister_frame_info through libgcc_s's PLT, so with libehelf-eh loaded
//                 first the frames are registered with ours (and libgcc_s frees the object it
//                 allocated, which ours gives back).
//   jit libgcc-only FDEs registered inside libgcc_s alone (its __register_frame_info_bases
//                 called directly): ours hands the raise to libgcc_s, which unwinds them.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <pthread.h>
#include <stdexcept>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <unwind.h>
#include <vector>

#include "jit_code.hpp"

extern "C" void __register_frame(void*);
extern "C" void __deregister_frame(void*);
extern "C" void __register_frame_info(const void*, void*);
extern "C" void* __deregister_frame_info(const void*);
extern "C" void __register_frame_info_table(void*, void*);
extern "C" const void* _Unwind_Find_FDE(void*, void*);

struct Noisy {
  const char* name;
  ~Noisy() {
    if (name) std::printf("  ~%s\n", name);
  }
};

extern "C" void callback() {
  Noisy n{"callback's"};
  throw std::runtime_error("thrown under JIT code");
}

extern "C" void quiet_callback() {
  Noisy n{nullptr};
  throw 7;
}

extern "C" void exits() {
  Noisy n{"exits'"};
  pthread_exit(nullptr);
}

// The return addresses _Unwind_Backtrace sees from here.
std::vector<uintptr_t> g_trace;
extern "C" void traces() {
  g_trace.clear();
  _Unwind_Backtrace(
      [](_Unwind_Context* ctx, void*) {
        g_trace.push_back(_Unwind_GetIP(ctx));
        return _URC_NO_REASON;
      },
      nullptr);
}

namespace {

using Jit = void (*)(void (*)());

void throw_through(uint8_t* code, const char* label) {
  std::printf("JIT code %s\n", label);
  for (int i = 0; i < 2; ++i) {
    try {
      Noisy n{"main's"};
      reinterpret_cast<Jit>(code)(callback);
      std::puts("not reached");
    } catch (const std::exception& e) {
      std::printf("caught: %s\n", e.what());
    }
  }
}

void exit_through(uint8_t* code) {
  // A forced unwind (pthread_exit: libgcc_s's unwinder, run by glibc) through the JIT frame,
  // continued from the landing pads below it by the _Unwind_Resume the program binds to.
  pthread_t t;
  pthread_create(
      &t, nullptr,
      [](void* c) -> void* {
        Noisy n{"thread's"};
        reinterpret_cast<Jit>(c)(exits);
        return nullptr;
      },
      code);
  pthread_join(t, nullptr);
  std::puts("joined");
}

void trace_through(uint8_t* code, size_t size) {
  reinterpret_cast<Jit>(code)(traces);
  bool jit = false;
  for (uintptr_t ip : g_trace)
    jit = jit || (ip > uintptr_t(code) && ip <= uintptr_t(code) + size);
  // (the same program under both unwinders: the same number of frames up to the outermost)
  std::printf("backtrace: JIT frame %s, %zu frames\n", jit ? "seen" : "missing", g_trace.size());
}

void find_fde(uint8_t* pc, const uint8_t* expected_fde, uint8_t* function) {
  void* bases[3] = {};
  const void* fde = _Unwind_Find_FDE(pc, bases);
  std::printf("_Unwind_Find_FDE: %s, function %s; enclosing function %s\n",
              fde == expected_fde ? "the registered FDE" : "another",
              bases[2] == function ? "right" : "wrong",
              _Unwind_FindEnclosingFunction(pc + 1) == function ? "right" : "wrong");
}

int with_libgcc_registration(uint8_t* mem) {
  void* libgcc = dlopen("libgcc_s.so.1", RTLD_NOW);
  auto reg = reinterpret_cast<void (*)(void*)>(dlvsym(libgcc, "__register_frame", "GCC_3.0"));
  auto dereg = reinterpret_cast<void (*)(void*)>(dlvsym(libgcc, "__deregister_frame", "GCC_3.0"));
  if (!reg || !dereg) return 77;
  // Without a frame pointer (one with would be unwound by ours through rbp even if ours did not
  // know its FDE, as code in no module is).
  std::memcpy(mem, kWithout, sizeof kWithout);
  std::vector<uint8_t> f =
      eh_frame_for(uint64_t(mem), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi);
  reg(f.data());
  throw_through(mem, "registered with libgcc_s's own __register_frame");
  dereg(f.data());
  return 0;
}

// FDEs registered inside libgcc_s alone: its __register_frame_info_bases called directly (the
// function itself, not a PLT call that libehelf-eh would take). Ours cannot find the JIT frame
// and hands the raise to libgcc_s, which unwinds it.
int with_libgcc_only(uint8_t* mem) {
  void* libgcc = dlopen("libgcc_s.so.1", RTLD_NOW);
  using Register = void (*)(const void*, void*, void*, void*);
  using Deregister = void* (*)(const void*);
  auto reg = reinterpret_cast<Register>(dlvsym(libgcc, "__register_frame_info_bases", "GCC_3.0"));
  auto dereg =
      reinterpret_cast<Deregister>(dlvsym(libgcc, "__deregister_frame_info_bases", "GCC_3.0"));
  if (!reg || !dereg) return 77;
  std::memcpy(mem, kWithout, sizeof kWithout);
  std::vector<uint8_t> f =
      eh_frame_for(uint64_t(mem), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi);
  static void* object[8]; // libgcc's struct object (6 words on x86_64)
  reg(f.data(), object, nullptr, nullptr);
  throw_through(mem, "registered inside libgcc_s only");
  std::printf("libgcc_s gives back the object: %s\n", dereg(f.data()) == object ? "yes" : "no");
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  auto* mem = static_cast<uint8_t*>(
      mmap(nullptr, 8192, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  if (mem == MAP_FAILED) return 77;
  if (argc > 1 && std::string(argv[1]) == "libgcc") return with_libgcc_registration(mem);
  if (argc > 1 && std::string(argv[1]) == "libgcc-only") return with_libgcc_only(mem);
  uint8_t* const first = mem;       // code at the start of the page
  uint8_t* const second = mem + 64; // and 64 bytes in

  // 1. __register_frame, the FDEs on the heap (far from the code).
  std::memcpy(first, kWithFramePointer, sizeof kWithFramePointer);
  std::memcpy(second, kWithout, sizeof kWithout);
  std::vector<uint8_t> heap[2] = {
      eh_frame_for(uint64_t(first), sizeof kWithFramePointer, kWithFramePointerCfi,
                   sizeof kWithFramePointerCfi),
      eh_frame_for(uint64_t(second), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi)};
  for (auto& f : heap)
    __register_frame(f.data());
  find_fde(first + 6, heap[0].data() + kFdeOffset, first);
  throw_through(first, "with a frame pointer");
  throw_through(second, "without a frame pointer");
  exit_through(first);
  exit_through(second);
  trace_through(second, sizeof kWithout);
  for (auto& f : heap)
    __deregister_frame(f.data());

  // 2. Other code at the same addresses, __register_frame_info with the FDEs in the code's own
  // page: what was known of the old code must not be used.
  std::memcpy(first, kWithout, sizeof kWithout);
  std::memcpy(second, kWithFramePointer, sizeof kWithFramePointer);
  static char objects[2][64];
  std::vector<uint8_t> near[2] = {
      eh_frame_for(uint64_t(first), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi),
      eh_frame_for(uint64_t(second), sizeof kWithFramePointer, kWithFramePointerCfi,
                   sizeof kWithFramePointerCfi)};
  uint8_t* placed[2] = {mem + 4096, mem + 4096 + 512};
  for (int i = 0; i < 2; ++i) {
    std::memcpy(placed[i], near[i].data(), near[i].size());
    __register_frame_info(placed[i], objects[i]);
  }
  find_fde(second + 6, placed[1] + kFdeOffset, second);
  throw_through(first, "replaced, without a frame pointer");
  throw_through(second, "replaced, with a frame pointer");
  trace_through(first, sizeof kWithout);
  for (int i = 0; i < 2; ++i)
    std::printf("__deregister_frame_info gives back the object: %s\n",
                __deregister_frame_info(placed[i]) == objects[i] ? "yes" : "no");

  // 3. __register_frame_info_table: an array of pointers to FDEs.
  std::vector<uint8_t> tabled =
      eh_frame_for(uint64_t(first), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi);
  void* table[2] = {tabled.data() + kFdeOffset, nullptr};
  __register_frame_info_table(table, objects[0]);
  throw_through(first, "registered as a table of FDEs");
  std::printf("table: object given back: %s\n",
              __deregister_frame_info(table) == objects[0] ? "yes" : "no");

  // An FDE registered alone, its CIE before it (as LLVM's JIT registers FDEs for LLVM's
  // libunwind): its records end at the next FDE's length, set to 0.
  std::vector<uint8_t> two =
      eh_frame_for(uint64_t(first), sizeof kWithout, kWithoutCfi, sizeof kWithoutCfi);
  two.resize(two.size() + 8, 0);
  __register_frame(two.data() + kFdeOffset);
  throw_through(first, "registered as a lone FDE");
  __deregister_frame(two.data() + kFdeOffset);

  // 4. Threads throwing through JIT code while this thread registers and deregisters another
  // function's FDEs.
  std::vector<uint8_t> steady = eh_frame_for(uint64_t(second), sizeof kWithFramePointer,
                                             kWithFramePointerCfi, sizeof kWithFramePointerCfi);
  std::vector<uint8_t> churn =
      eh_frame_for(uint64_t(mem + 2048), 16, kWithoutCfi, sizeof kWithoutCfi);
  __register_frame(steady.data());
  std::atomic<int> caught{0};
  std::vector<std::thread> throwers;
  for (int t = 0; t < 2; ++t)
    throwers.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        try {
          reinterpret_cast<Jit>(second)(quiet_callback);
        } catch (int) {
          caught.fetch_add(1);
        }
      }
    });
  for (int i = 0; i < 500 && caught.load() < 4000; ++i) {
    __register_frame(churn.data());
    __deregister_frame(churn.data());
  }
  for (auto& t : throwers)
    t.join();
  std::printf("threads: %d throws caught while frames were registered and deregistered\n",
              caught.load());
  __deregister_frame(steady.data());
  return 0;
}
