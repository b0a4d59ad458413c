// The JSON reports with one allocation failing, each in turn: bad_alloc comes out, never a
// crash. nlohmann::json 3.11.2 left a null promoted to an object by operator[] as an object
// without a map when that map's allocation failed, and its destructor dereferenced null: under
// `ulimit -v`, `ehelf dump --json` on libLLVM ended in a segfault instead of "out of memory".
// Its own program: the global operator new is replaced here (a countdown to one failure). Each
// failure runs in a child process: a bad_alloc thrown in a destructor (nlohmann::json's allocates)
// ends in std::terminate, which ehelf's main turns into "out of memory" (exit status 2), as the
// child does here; a signal is the failure.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <exception>
#include <new>
#include <string>

#include <nlohmann/json.hpp>

#include "check/report.hpp"
#include "dwarf/module_cfi.hpp"
#include "report/cfi_stats_text.hpp"
#include "report/table_json.hpp"

namespace {

// Allocations until the one that fails: < 0, none fails; each allocation counts it down.
long g_fail_in = -1;
long g_allocations = 0;

void* allocate(std::size_t size) {
  ++g_allocations;
  if (g_fail_in >= 0 && g_fail_in-- == 0) throw std::bad_alloc();
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}

} // namespace

void* operator new(std::size_t size) {
  return allocate(size);
}
void* operator new[](std::size_t size) {
  return allocate(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

namespace ehelf {
namespace {

// As ehelf's main does: std::terminate with bad_alloc in flight is "out of memory".
[[noreturn]] void on_terminate() {
  if (std::exception_ptr in_flight = std::current_exception()) {
    try {
      std::rethrow_exception(in_flight);
    } catch (const std::bad_alloc&) {
      ::_exit(2);
    } catch (...) {
    }
  }
  std::abort();
}

// Runs make() once to count its allocations, then once with each of them failing in turn, in a
// child process: every run succeeds (exit status 0), throws bad_alloc (1) or terminates with it
// in flight (2); none ends in a signal.
template <typename Make> void each_allocation_failing(Make make) {
  g_allocations = 0;
  make();
  const long total = g_allocations;
  ASSERT_GT(total, 0);
  long thrown = 0;
  for (long k = 0; k < total; ++k) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      std::set_terminate(on_terminate);
      g_fail_in = k;
      try {
        make();
      } catch (const std::bad_alloc&) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status))
        << "allocation " << k << " of " << total << " failing: signal " << WTERMSIG(status);
    ASSERT_LE(WEXITSTATUS(status), 2);
    thrown += WEXITSTATUS(status) != 0;
  }
  EXPECT_GT(thrown, 0) << total << " allocations";
}

TEST(JsonOutOfMemory, CfiTables) {
  LoadOptions lo;
  lo.separate_debug_file = false;
  auto m = load_module_cfi(EHELF_FIXTURE_DIR "/cfi_variety", lo);
  ASSERT_TRUE(m);
  each_allocation_failing([&] { (void)cfi_to_json(*m); });
}

TEST(JsonOutOfMemory, Stats) {
  CfiStats s;
  StatsOptions opt;
  StatsReport r;
  each_allocation_failing([&] { (void)stats_to_json(s, opt, r); });
}

TEST(JsonOutOfMemory, CheckReport) {
  check::CheckResult result;
  result.inconsistencies.resize(3);
  result.uncovered = {"a: f", "b: g"};
  each_allocation_failing([&] { (void)check::to_json(result); });
}

} // namespace
} // namespace ehelf
