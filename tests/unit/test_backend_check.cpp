// Every runtime backend against the model, through the one oracle (check_backend): the system's
// libc, libstdc++, ld.so, libm and every fixture program (each built with its own flags).
#include <gtest/gtest.h>

#include <filesystem>

#include <fmt/format.h>

#include "dwarf/module_cfi.hpp"
#include "model/registers.hpp"
#include "runtime/backend_check.hpp"
#include "runtime/compact_table.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

std::vector<std::string> modules_to_check() {
  std::vector<std::string> paths = {test::libc_path(), "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
                                    "/usr/lib64/ld-linux-x86-64.so.2",
                                    "/usr/lib/x86_64-linux-gnu/libm.so.6"};
  for (const auto& e : std::filesystem::directory_iterator(EHELF_FIXTURE_DIR))
    if (e.is_regular_file() && ::access(e.path().c_str(), X_OK) == 0)
      paths.push_back(e.path().string());
  return paths;
}

TEST(BackendCheck, EveryBackendAgreesWithTheModelOnSystemLibrariesAndFixtures) {
  uint64_t compact_agreed = 0, hot_agreed = 0, fast_agreed = 0, fp_agreed = 0,
           remembered_agreed = 0;
  for (const std::string& path : modules_to_check()) {
    SCOPED_TRACE(path);
    auto m = load_module_cfi(path);
    ASSERT_TRUE(m) << m.error().to_string();
    auto table = build_unwind_table(*m);
    ASSERT_TRUE(table) << table.error().to_string();
    for (const BackendCheck& c : check_runtime_backends(*table)) {
      EXPECT_TRUE(c.ok()) << c.backend << ": " << c.mismatch_count << " mismatches, first: "
                          << (c.mismatches.empty() ? "" : c.mismatches.front());
      EXPECT_EQ(c.checks, c.agreed + c.both_failed + c.not_applicable + c.mismatch_count);
      if (c.backend == "compact table") compact_agreed += c.agreed;
      if (c.backend == "hot form") hot_agreed += c.agreed;
      if (c.backend == "hot form, fast path") fast_agreed += c.agreed;
      if (c.backend == "frame pointer") fp_agreed += c.agreed;
      if (c.backend == "remembered row") remembered_agreed += c.agreed;
    }
  }
  // Each backend really answered (libc alone has tens of thousands of ranges).
  EXPECT_GT(compact_agreed, 10000u);
  EXPECT_GT(hot_agreed, 10000u);
  EXPECT_GT(fast_agreed, 10000u);
  EXPECT_GT(fp_agreed, 10u);
  EXPECT_GT(remembered_agreed, 10000u);
}

// The oracle can fail: a compact table whose rules read the return address 8 bytes off, or
// forget a saved rbx, is caught at every range it touches.
TEST(BackendCheck, CatchesAWrongBackend) {
  auto m = load_module_cfi(test::libc_path());
  ASSERT_TRUE(m);
  auto table = build_unwind_table(*m);
  ASSERT_TRUE(table);
  const CompactTable compact(*table);
  for (int flaw : {0, 1}) {
    BackendUnderTest wrong{"flawed", kWalkRegisters, false, {}};
    wrong.step = [&](uint64_t pc, const TableRange&, RegisterState& regs, MemoryReader& mem,
                     const SyntheticStack&, bool& signal_frame) {
      UnwindRule rule = compact.lookup(pc);
      if (rule.kind != UnwindRule::CfaRsp && rule.kind != UnwindRule::CfaRbp)
        return BackendAnswer::NotApplicable;
      if (flaw == 0) rule.rip_offset = static_cast<int16_t>(rule.rip_offset + 8);
      if (flaw == 1 && rule.rbx == UnwindRule::AtCfa) rule.rbx = UnwindRule::Same;
      signal_frame = rule.signal_frame;
      return apply_rule(rule, regs, mem) == StopReason::None ? BackendAnswer::Unwound
                                                             : BackendAnswer::Failed;
    };
    const BackendCheck c = check_backend(*table, wrong);
    EXPECT_GT(c.mismatch_count, 1000u) << "flaw " << flaw;
  }
}

} // namespace
} // namespace ehelf
