// LibbpfLog (bpf/libbpf_log.hpp): libbpf hands a refused program's verifier log as one message
// of any length; the error that reports the refusal shows its last lines, which say why.
#include <gtest/gtest.h>

#include <bpf/libbpf.h>

#include <cstdarg>
#include <string>

#include "bpf/libbpf_log.hpp"

namespace ehelf::bpf {
namespace {

// Calls the print function LibbpfLog installed, as libbpf does.
int print_through(libbpf_print_fn_t print, libbpf_print_level level, const char* format, ...) {
  va_list args;
  va_start(args, format);
  const int n = print(level, format, args);
  va_end(args);
  return n;
}

TEST(LibbpfLog, KeepsTheLastLinesOfALongVerifierLog) {
  LibbpfLog log;
  const libbpf_print_fn_t installed = libbpf_set_print(nullptr);
  ASSERT_NE(installed, nullptr);
  std::string verifier_log = "-- BEGIN PROG LOAD LOG --\n";
  for (int i = 0; i < 2000; i++)
    verifier_log += std::to_string(i) + ": (bf) r1 = r6 ; R1=map_value(map=scratch)\n";
  verifier_log += "R1 !read_ok\nprocessed 2000 insns\n-- END PROG LOAD LOG --\n";
  print_through(installed, LIBBPF_WARN, "libbpf: prog 'p': BPF program load failed: %s\n",
                "Permission denied");
  print_through(installed, LIBBPF_WARN, "%s", verifier_log.c_str());
  print_through(installed, LIBBPF_DEBUG, "%s\n", "debug messages are not kept");
  libbpf_set_print(installed);
  EXPECT_EQ(log.last_lines(3), "R1 !read_ok\nprocessed 2000 insns\n-- END PROG LOAD LOG --");
  EXPECT_EQ(log.last_lines(1000000).rfind("libbpf: prog 'p': BPF program load failed", 0), 0u);
}

} // namespace
} // namespace ehelf::bpf
