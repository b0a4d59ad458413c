// (One file of 924 lines: one command's tests, each case a few lines over shared compile helpers.)
// ehelf compile: eh_elf objects from real libraries (differential check against the interpreter,
// the info block, build-id refusal), the ABI's error codes, the hand-written expression rows of
// the cfi_variety fixture, hostile .eh_frame input (compiled in a child process, so a crash is a
// test failure and not the end of the test binary), and the ABI header as C and C++.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <random>
#include <set>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "compile/compile_module.hpp"
#include "dwarf/cfa_instruction.hpp"
#include "dwarf/module_cfi.hpp"
#include "test_support.hpp"

namespace ehelf {
namespace {

namespace fs = std::filesystem;

class TempDir {
public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "ehelf-compile-test-XXXXXX").string();
    char* p = ::mkdtemp(tmpl.data());
    if (p) path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

private:
  std::string path_;
};

std::string join(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines)
    s += "  " + l + "\n";
  return s;
}

const char* set_name(RegisterSet set) {
  return set == RegisterSet::Minimal ? "minimal" : "callee_saved";
}

std::vector<uint8_t> build_id_of(const std::string& path) {
  auto elf = ElfFile::open(path);
  if (!elf) return {};
  auto id = (*elf)->build_id();
  return id ? std::vector<uint8_t>(id->begin(), id->end()) : std::vector<uint8_t>();
}

// Synthetic memory shared by the remote deref and the interpreter: every word is a hash of its
// address.
uint64_t word_at(uint64_t addr) {
  uint64_t x = (addr ^ 0x5a5a5a5a) * 0x9e3779b97f4a7c15ULL;
  return x ^ (x >> 31);
}
int word_deref(uint64_t addr, uint64_t* value, void*) {
  *value = word_at(addr);
  return 0;
}
int refusing_deref(uint64_t, uint64_t*, void*) {
  return 1;
}
class WordMemory final : public MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override {
    uint64_t v = word_at(addr);
    std::memcpy(out, &v, size < 8 ? size : 8);
    return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Real libraries, both register sets.

struct LibraryCase {
  std::string path;
  RegisterSet set;
};

// libc and libstdc++ always; then up to four more common libraries that exist here.
std::vector<std::string> library_paths() {
  const std::string dir = "/usr/lib/x86_64-linux-gnu/";
  std::vector<std::string> paths = {dir + "libc.so.6", dir + "libstdc++.so.6"};
  int extra = 0;
  for (const char* name : {"libz.so.1", "libm.so.6", "ld-linux-x86-64.so.2", "libgcc_s.so.1",
                           "libzstd.so.1", "libpthread.so.0", "libdl.so.2"}) {
    if (extra == 4) break;
    std::error_code ec;
    if (fs::is_regular_file(dir + name, ec)) {
      paths.push_back(dir + name);
      ++extra;
    }
  }
  return paths;
}

std::vector<LibraryCase> library_cases() {
  std::vector<LibraryCase> cases;
  for (const auto& p : library_paths())
    for (RegisterSet s : {RegisterSet::Minimal, RegisterSet::CalleeSaved})
      cases.push_back({p, s});
  return cases;
}

std::string case_name(const testing::TestParamInfo<LibraryCase>& info) {
  std::string n = fs::path(info.param.path).filename().string() + "_" + set_name(info.param.set);
  for (char& c : n)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
}

class CompileLibrary : public testing::TestWithParam<LibraryCase> {};

TEST_P(CompileLibrary, VerifiesAndDescribesItself) {
  const auto& [path, set] = GetParam();
  TempDir dir;
  ASSERT_FALSE(dir.path().empty());
  std::string out = dir / (fs::path(path).filename().string() + "." + set_name(set) + ".so");
  CompileOptions options;
  options.registers = set;
  options.verify = true;
  auto r = compile_module(path, out, options);
  ASSERT_TRUE(r) << r.error().to_string();

  // The differential check: every range, three states (first and last address, and the last
  // address near the top of the stack), local and remote.
  ASSERT_TRUE(r->verification);
  const DifferentialResult& v = *r->verification;
  EXPECT_EQ(v.mismatch_count, 0u) << join(v.mismatches);
  EXPECT_EQ(v.checks, 6 * r->codegen.model_ranges);
  EXPECT_EQ(v.agreed + v.both_failed + v.fallbacks + v.mismatch_count, v.checks);
  EXPECT_GT(v.agreed, 200u);
  EXPECT_GE(v.agreed, v.checks / 2) << "agreed " << v.agreed << " of " << v.checks;
  EXPECT_LE(v.fallbacks, v.checks / 100) << "more than 1% of rows need the interpreter";

  // The report.
  EXPECT_GT(r->eh_frame, 0u);
  EXPECT_GT(r->text_rodata, r->eh_frame);
  EXPECT_GT(r->eh_elf_text, 0u);
  EXPECT_GT(r->eh_elf_rodata, 0u);
  EXPECT_GE(r->eh_elf_file, r->eh_elf_text + r->eh_elf_rodata);
  EXPECT_EQ(fs::file_size(out), r->eh_elf_file);

  // The info block.
  auto id = build_id_of(path);
  ASSERT_FALSE(id.empty()) << path << " has no build-id";
  auto object = EhElfObject::load(out, id);
  ASSERT_TRUE(object) << object.error().to_string();
  const ehelf_info& info = (*object)->info();
  EXPECT_EQ(info.abi_version, EHELF_ABI_VERSION);
  EXPECT_EQ(info.register_set, set == RegisterSet::Minimal
                                   ? unsigned(EHELF_REGISTERS_MINIMAL)
                                   : unsigned(EHELF_REGISTERS_CALLEE_SAVED));
  ASSERT_EQ(info.build_id_size, id.size());
  EXPECT_EQ(std::memcmp(info.build_id, id.data(), id.size()), 0);
  auto module = load_module_cfi(path);
  ASSERT_TRUE(module) << module.error().to_string();
  auto table = build_unwind_table(*module);
  ASSERT_TRUE(table) << table.error().to_string();
  ASSERT_FALSE(table->ranges().empty());
  EXPECT_EQ(info.pc_low, table->ranges().front().begin);
  EXPECT_EQ(info.pc_high, table->ranges().back().end);
  EXPECT_EQ(info.pc_low, r->codegen.pc_low);
  EXPECT_EQ(info.pc_high, r->codegen.pc_high);
  EXPECT_EQ(info.ranges, r->codegen.ranges);
  EXPECT_EQ(info.bodies, r->codegen.bodies);
  EXPECT_EQ(info.fallback_rows, r->codegen.fallback_bodies);
  EXPECT_LE(info.ranges, 2 * r->codegen.model_ranges + 1);

  // Lookup edges: just outside [pc_low, pc_high), the last byte inside, and gaps between FDEs.
  auto status_at = [&](uint64_t pc) {
    ehelf_context_t ctx{};
    for (unsigned s = 0; s < EHELF_NREGS; ++s) {
      ctx.regs[s] = 0x10000 + 0x100 * s;
      ctx.flags |= EHELF_VALID(s);
    }
    ctx.stack_lo = 0;
    ctx.stack_hi = UINT64_MAX;
    return (*object)->unwind_remote(pc, &ctx, word_deref, nullptr);
  };
  EXPECT_EQ(status_at(info.pc_low - 1), EHELF_NO_ENTRY);
  EXPECT_EQ(status_at(info.pc_high), EHELF_NO_ENTRY);
  EXPECT_NE(status_at(info.pc_high - 1), EHELF_NO_ENTRY);
  EXPECT_NE(status_at(info.pc_low), EHELF_NO_ENTRY);
  size_t gaps = 0;
  auto ranges = table->ranges();
  for (size_t i = 0; i + 1 < ranges.size() && gaps < 200; ++i)
    if (ranges[i].end < ranges[i + 1].begin) {
      ++gaps;
      EXPECT_EQ(status_at(ranges[i].end), EHELF_NO_ENTRY) << std::hex << ranges[i].end;
      EXPECT_EQ(status_at(ranges[i + 1].begin - 1), EHELF_NO_ENTRY)
          << std::hex << ranges[i + 1].begin - 1;
    }

  // A build-id mismatch is refused, naming the file.
  std::vector<uint8_t> wrong = id;
  wrong[0] ^= 0xff;
  auto refused = EhElfObject::load(out, wrong);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().to_string().find("build-id mismatch"), std::string::npos)
      << refused.error().to_string();
  EXPECT_NE(refused.error().to_string().find(out), std::string::npos);
  auto shorter = EhElfObject::load(out, std::span<const uint8_t>(id.data(), id.size() - 1));
  EXPECT_FALSE(shorter);
}

INSTANTIATE_TEST_SUITE_P(Libraries, CompileLibrary, testing::ValuesIn(library_cases()), case_name);

// ---------------------------------------------------------------------------------------------
// The error codes of the ABI, on libc.

class CompiledLibc : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    std::string out = *dir_ / "libc.minimal.so";
    auto r = compile_module(test::libc_path(), out, {});
    if (!r) {
      error_ = r.error().to_string();
      return;
    }
    auto o = EhElfObject::load(out, build_id_of(test::libc_path()));
    if (!o) {
      error_ = o.error().to_string();
      return;
    }
    object_ = std::move(*o).release();
    auto module = load_module_cfi(test::libc_path());
    if (!module) {
      error_ = module.error().to_string();
      return;
    }
    auto table = build_unwind_table(*module);
    if (!table) {
      error_ = table.error().to_string();
      return;
    }
    // A function entry: CFA = rsp + 8, return address at CFA - 8, nothing else saved.
    for (const TableRange& range : table->ranges()) {
      RowView row = table->row(range.row);
      const RegisterRule* ra = row.rule_for(16);
      if (range.begin == table->function(range.function).pc_begin &&
          row.cfa.kind == CfaRule::Kind::RegOffset && row.cfa.reg == 7 && row.cfa.offset == 8 &&
          ra && ra->kind == RegisterRule::Kind::Offset && ra->offset == -8 &&
          !table->function(range.function).signal_frame) {
        entry_pc_ = range.begin;
        break;
      }
    }
  }
  static void TearDownTestSuite() {
    delete object_;
    object_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(error_.empty()) << error_;
    ASSERT_NE(entry_pc_, 0u);
  }
  static ehelf_context_t full_context() {
    ehelf_context_t ctx{};
    for (unsigned s = 0; s < EHELF_NREGS; ++s) {
      ctx.regs[s] = 0x7700 + s;
      ctx.flags |= EHELF_VALID(s);
    }
    ctx.stack_lo = 0;
    ctx.stack_hi = UINT64_MAX;
    return ctx;
  }
  static void expect_failure(int rc, int want, const ehelf_context_t& before,
                             const ehelf_context_t& after) {
    EXPECT_EQ(rc, want);
    EXPECT_TRUE(after.flags & EHELF_FLAG_ERROR);
    EXPECT_EQ(std::memcmp(before.regs, after.regs, sizeof before.regs), 0)
        << "registers changed on failure";
    EXPECT_EQ(after.flags & ~EHELF_FLAG_ERROR, before.flags & ~EHELF_FLAG_ERROR);
  }

  static TempDir* dir_;
  static EhElfObject* object_;
  static std::string error_;
  static uint64_t entry_pc_;
};
TempDir* CompiledLibc::dir_ = nullptr;
EhElfObject* CompiledLibc::object_ = nullptr;
std::string CompiledLibc::error_;
uint64_t CompiledLibc::entry_pc_ = 0;

TEST_F(CompiledLibc, NoEntryOutsideTheTable) {
  for (uint64_t pc : {uint64_t(0), object_->info().pc_low - 1, object_->info().pc_high,
                      object_->info().pc_high + 0x100000, UINT64_MAX}) {
    ehelf_context_t ctx = full_context();
    ehelf_context_t before = ctx;
    expect_failure(object_->unwind_local(pc, &ctx), EHELF_NO_ENTRY, before, ctx);
    ctx = before;
    expect_failure(object_->unwind_remote(pc, &ctx, word_deref, nullptr), EHELF_NO_ENTRY, before,
                   ctx);
  }
}

TEST_F(CompiledLibc, MissingRegisterWhenRspIsUnknownAtAnEntry) {
  uint64_t stack[4] = {0x4242, 1, 2, 3};
  ehelf_context_t ctx = full_context();
  ctx.regs[EHELF_RSP] = reinterpret_cast<uint64_t>(stack);
  ctx.flags &= ~EHELF_VALID(EHELF_RSP);
  ehelf_context_t before = ctx;
  expect_failure(object_->unwind_local(entry_pc_, &ctx), EHELF_MISSING_REGISTER, before, ctx);
  ctx = before;
  expect_failure(object_->unwind_remote(entry_pc_, &ctx, word_deref, nullptr),
                 EHELF_MISSING_REGISTER, before, ctx);
}

TEST_F(CompiledLibc, BadReadWhenTheStackBoundsExcludeTheReturnAddress) {
  uint64_t stack[8] = {0x4242, 11, 12, 13, 14, 15, 16, 17};
  auto at = [&](int i) { return reinterpret_cast<uint64_t>(&stack[i]); };
  ehelf_context_t ctx = full_context();
  ctx.regs[EHELF_RSP] = at(0);
  // Bounds above, below, partly over the word, and empty.
  for (auto [lo, hi] : {std::pair{at(1), at(8)}, std::pair{at(8), at(8) + 64},
                        std::pair{at(0) - 64, at(0)}, std::pair{at(0), at(0) + 4},
                        std::pair{at(0) + 4, at(8)}, std::pair{uint64_t(0), uint64_t(0)}}) {
    ctx.stack_lo = lo;
    ctx.stack_hi = hi;
    ehelf_context_t before = ctx;
    expect_failure(object_->unwind_local(entry_pc_, &ctx), EHELF_BAD_READ, before, ctx);
    ctx = before;
  }
  // Remote: a refusing deref, and no deref at all.
  ehelf_context_t before = ctx;
  expect_failure(object_->unwind_remote(entry_pc_, &ctx, refusing_deref, nullptr), EHELF_BAD_READ,
                 before, ctx);
  ctx = before;
  expect_failure(object_->unwind_remote(entry_pc_, &ctx, nullptr, nullptr), EHELF_BAD_READ, before,
                 ctx);

  // With the word inside the bounds the same frame unwinds, and the error flag is cleared.
  ctx = full_context();
  ctx.regs[EHELF_RSP] = at(0);
  ctx.stack_lo = at(0);
  ctx.stack_hi = at(8);
  ctx.flags |= EHELF_FLAG_ERROR;
  ASSERT_EQ(object_->unwind_local(entry_pc_, &ctx), EHELF_OK);
  EXPECT_EQ(ctx.regs[EHELF_RIP], 0x4242u);
  EXPECT_EQ(ctx.regs[EHELF_RSP], at(1));
  EXPECT_EQ(ctx.regs[EHELF_RBP], 0x7700u + EHELF_RBP);
  EXPECT_EQ(ctx.regs[EHELF_RBX], 0x7700u + EHELF_RBX);
  EXPECT_EQ(ctx.flags & 0xfu, 0xfu);
  EXPECT_FALSE(ctx.flags & EHELF_FLAG_ERROR);
  EXPECT_FALSE(ctx.flags & EHELF_FLAG_SIGNAL_FRAME);
  // Exactly at the top: [rsp, rsp + 8) is the last readable word.
  ctx = full_context();
  ctx.regs[EHELF_RSP] = at(7);
  ctx.stack_lo = at(0);
  ctx.stack_hi = at(8);
  ASSERT_EQ(object_->unwind_local(entry_pc_, &ctx), EHELF_OK);
  EXPECT_EQ(ctx.regs[EHELF_RIP], 17u);
}

// ---------------------------------------------------------------------------------------------
// The cfi_variety fixture: hand-written rules, including expressions.

std::string fixture(const char* name) {
  return std::string(EHELF_FIXTURE_DIR) + "/" + name;
}

// Rows of the common shape share one step function (each body a call with packed constants);
// the others keep a body of their own. Both kinds, at the edges of the packing, must agree with
// the interpreter.
TEST(CompileFixture, SharedStepEdgesAgreeWithTheInterpreter) {
  const std::string path = fixture("compile_save_offsets");
  ASSERT_TRUE(fs::exists(path)) << path;
  auto module = load_module_cfi(path);
  ASSERT_TRUE(module) << module.error().to_string();
  auto table = build_unwind_table(*module);
  ASSERT_TRUE(table) << table.error().to_string();
  TempDir dir;
  for (RegisterSet set : {RegisterSet::Minimal, RegisterSet::CalleeSaved}) {
    SCOPED_TRACE(set_name(set));
    CodegenOptions codegen;
    codegen.registers = set;
    auto source = generate_eh_elf_source(*table, codegen);
    ASSERT_TRUE(source) << source.error().to_string();
    size_t shared = 0;
    for (size_t at = 0; (at = source->find("return ehelf_step(ctx", at)) != std::string::npos; ++at)
      ++shared;
    EXPECT_GE(shared, 4u); // packed_edges' rows, return_address_elsewhere's
    // rbx at CFA - 1032 is beyond the packing: that row has a body of its own.
    EXPECT_NE(source->find("ehelf_read(ctx, cfa + (uint64_t)-INT64_C(1032)"), std::string::npos);
    // The return address at CFA - 16, packed.
    EXPECT_NE(source->find("UINT64_C(0xfe"), std::string::npos);

    CompileOptions options;
    options.registers = set;
    options.verify = true;
    auto r = compile_module(path, dir / fmt::format("edges.{}.so", set_name(set)), options);
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_TRUE(r->verification);
    EXPECT_EQ(r->verification->mismatch_count, 0u) << join(r->verification->mismatches);
    EXPECT_GE(r->verification->agreed, 20u);
  }
}

TEST(CompileFixture, CfiVarietyExpressionRowsCompileAndAgree) {
  const std::string path = fixture("cfi_variety");
  ASSERT_TRUE(fs::exists(path)) << path;
  auto module = load_module_cfi(path);
  ASSERT_TRUE(module) << module.error().to_string();
  auto table = build_unwind_table(*module);
  ASSERT_TRUE(table) << table.error().to_string();
  const Symbol* fn = nullptr;
  const Symbol* odd = nullptr;
  for (const Symbol& s : module->elf->symbols()) {
    if (s.name == "expression_fn") fn = &s;
    if (s.name == "odd_rules_fn") odd = &s;
  }
  ASSERT_NE(fn, nullptr);
  ASSERT_NE(odd, nullptr);

  TempDir dir;
  for (RegisterSet set : {RegisterSet::Minimal, RegisterSet::CalleeSaved}) {
    SCOPED_TRACE(set_name(set));
    std::string out = dir / fmt::format("cfi_variety.{}.so", set_name(set));
    CompileOptions options;
    options.registers = set;
    options.verify = true;
    auto r = compile_module(path, out, options);
    ASSERT_TRUE(r) << r.error().to_string();
    ASSERT_TRUE(r->verification);
    EXPECT_EQ(r->verification->mismatch_count, 0u) << join(r->verification->mismatches);
    EXPECT_GT(r->verification->agreed, 50u);
    auto object = EhElfObject::load(out);
    ASSERT_TRUE(object) << object.error().to_string();
    const unsigned nslots = set == RegisterSet::Minimal ? 4 : 8;

    // Every range of expression_fn compiles (no interpreter fallback) and agrees with the
    // interpreter on all tracked registers, locally and remotely.
    bool saw_cfa_expr = false, saw_rbx_expr = false, saw_r12_val_expr = false;
    for (const TableRange& range : table->ranges()) {
      if (range.begin < fn->value || range.begin >= fn->value + fn->size) continue;
      RowView row = table->row(range.row);
      const RegisterRule* rbx = row.rule_for(3);
      const RegisterRule* r12 = row.rule_for(12);
      bool cfa_expr = row.cfa.kind == CfaRule::Kind::Expression;
      bool rbx_expr = rbx && rbx->kind == RegisterRule::Kind::Expression;
      bool r12_val = r12 && r12->kind == RegisterRule::Kind::ValExpression;
      saw_cfa_expr |= cfa_expr;
      saw_rbx_expr |= rbx_expr;
      saw_r12_val_expr |= r12_val;
      for (uint64_t pc : {range.begin, range.end - 1}) {
        SCOPED_TRACE(fmt::format("pc {:#x}", pc));
        std::vector<uint64_t> stack(512);
        for (size_t i = 0; i < stack.size(); ++i)
          stack[i] = word_at(reinterpret_cast<uint64_t>(&stack[i]));
        uint64_t base = reinterpret_cast<uint64_t>(&stack[256]);
        RegisterState regs;
        for (unsigned reg = 0; reg < x86_64::kGeneralRegs; ++reg)
          regs.set(reg, base + 8 * (reg % 5));
        regs.set(x86_64::RIP, pc);
        WordMemory mem;
        auto step = table->evaluate(range.row, regs, mem);
        ASSERT_TRUE(step) << step.error().to_string();
        for (bool remote : {false, true}) {
          ehelf_context_t ctx{};
          for (unsigned s = 0; s < nslots; ++s) {
            ctx.regs[s] = regs.get(kDwarfRegisterOfSlot[s]);
            ctx.flags |= EHELF_VALID(s);
          }
          ctx.stack_lo = reinterpret_cast<uint64_t>(stack.data());
          ctx.stack_hi = ctx.stack_lo + 8 * stack.size();
          int rc = remote ? (*object)->unwind_remote(pc, &ctx, word_deref, nullptr)
                          : (*object)->unwind_local(pc, &ctx);
          ASSERT_EQ(rc, EHELF_OK) << (remote ? "remote" : "local");
          for (unsigned s = 0; s < nslots; ++s) {
            unsigned reg = kDwarfRegisterOfSlot[s];
            ASSERT_EQ(bool(ctx.flags & EHELF_VALID(s)), step->caller.has(reg))
                << x86_64::register_name(reg);
            if (step->caller.has(reg)) {
              EXPECT_EQ(ctx.regs[s], step->caller.get(reg)) << x86_64::register_name(reg);
            }
          }
          if (cfa_expr) {
            // CFA = rbp + 16: the caller's rsp, rip at CFA - 8, rbp at CFA - 16.
            uint64_t rbp = regs.get(x86_64::RBP);
            EXPECT_EQ(ctx.regs[EHELF_RSP], rbp + 16);
            EXPECT_EQ(ctx.regs[EHELF_RIP], word_at(rbp + 8));
            EXPECT_EQ(ctx.regs[EHELF_RBP], word_at(rbp));
          }
          if (rbx_expr) {
            EXPECT_EQ(ctx.regs[EHELF_RBX], word_at(regs.get(x86_64::RBP) - 8));
          }
        }
      }
    }
    EXPECT_TRUE(saw_cfa_expr);
    EXPECT_TRUE(saw_rbx_expr);
    EXPECT_TRUE(saw_r12_val_expr);

    // odd_rules_fn has the 'S' augmentation: its entry row reports a signal frame.
    ehelf_context_t ctx{};
    uint64_t word = 0x1234;
    for (unsigned s = 0; s < nslots; ++s)
      ctx.flags |= EHELF_VALID(s);
    ctx.regs[EHELF_RSP] = reinterpret_cast<uint64_t>(&word);
    ctx.stack_lo = ctx.regs[EHELF_RSP];
    ctx.stack_hi = ctx.stack_lo + 8;
    ASSERT_EQ((*object)->unwind_local(odd->value, &ctx), EHELF_OK);
    EXPECT_TRUE(ctx.flags & EHELF_FLAG_SIGNAL_FRAME);
    EXPECT_EQ(ctx.regs[EHELF_RIP], 0x1234u);
  }
}

// ---------------------------------------------------------------------------------------------
// Hostile input: a real small ELF with a corrupted .eh_frame.

struct Outcome {
  bool crashed = false;
  std::string crash; // how the child died
  bool compiled = false;
  std::string error; // compile_module's error text
  uint64_t checks = 0, agreed = 0, both_failed = 0, fallbacks = 0, mismatches = 0;
  std::vector<std::string> mismatch_list; // the first 20
};

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += size_t(n);
  }
  return true;
}

// compile_module with verify=true in a child process (which dlopens and runs the object).
Outcome compile_isolated(const std::string& in, const std::string& out, RegisterSet set) {
  Outcome o;
  int fds[2];
  if (::pipe(fds) != 0) {
    o.crashed = true;
    o.crash = "pipe failed";
    return o;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::alarm(120); // a hang is a failure too
    CompileOptions options;
    options.registers = set;
    options.verify = true;
    auto r = compile_module(in, out, options);
    std::string msg;
    if (!r) {
      msg = "E" + r.error().to_string();
    } else if (!r->verification) {
      msg = "Xno verification";
    } else {
      const auto& v = *r->verification;
      msg = fmt::format("V{} {} {} {} {}\n", v.checks, v.agreed, v.both_failed, v.fallbacks,
                        v.mismatch_count);
      for (const std::string& m : v.mismatches)
        msg += m + "\n";
    }
    write_all(fds[1], msg);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    msg.append(buf, size_t(n));
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    o.crashed = true;
    o.crash =
        fmt::format("killed by signal {} ({})", WTERMSIG(status), strsignal(WTERMSIG(status)));
  } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || msg.empty()) {
    o.crashed = true;
    o.crash = fmt::format("exited with status {}", WEXITSTATUS(status));
  } else if (msg[0] == 'E') {
    o.error = msg.substr(1);
  } else if (msg[0] == 'V') {
    o.compiled = true;
    std::sscanf(msg.c_str() + 1, "%lu %lu %lu %lu %lu", &o.checks, &o.agreed, &o.both_failed,
                &o.fallbacks, &o.mismatches);
    for (size_t at = msg.find('\n'); at != std::string::npos && at + 1 < msg.size();) {
      size_t end = msg.find('\n', at + 1);
      o.mismatch_list.push_back(msg.substr(at + 1, end - at - 1));
      at = end;
    }
  } else {
    o.crashed = true;
    o.crash = msg;
  }
  return o;
}

class HostileCompile : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir;
    source_ = *dir_ / "recursion";
    std::string cmd =
        fmt::format("cc -O2 -fomit-frame-pointer -o {} {}/tests/fixtures/recursion.c 2>&1", source_,
                    EHELF_SOURCE_DIR);
    std::string log = test::run_command(cmd);
    if (!fs::exists(source_)) {
      setup_error_ = "cannot build recursion.c: " + log;
      return;
    }
    bytes_ = test::read_file(source_);
    auto module = load_module_cfi(source_);
    if (!module || !module->eh_frame) {
      setup_error_ = "recursion has no .eh_frame";
      return;
    }
    const Section* s = module->elf->find_section(".eh_frame");
    section_offset_ = s->offset;
    section_size_ = s->size;
    const CfiSection& cfi = *module->eh_frame;
    for (const Cie& c : cfi.cies)
      cies_.push_back({c.offset, c.instructions_offset, c.instructions.size()});
    for (const Fde& f : cfi.fdes) {
      fdes_.push_back({f.offset, f.instructions_offset, f.instructions.size()});
      auto insns = decode_cfa_program(cfi, cfi.cies[f.cie], &f, module->eh_frame_bases);
      if (!insns) continue;
      for (const CfaInstruction& i : *insns)
        if (i.opcode == 0x0e) def_cfa_offsets_.push_back(i.offset);
    }
    for (const Cie& c : cfi.cies) {
      // The return-address register (version 1: one byte) after length, id, version, the
      // augmentation string and the code/data alignment factors (one-byte LEB128s from GCC).
      ra_offsets_.push_back(c.offset + 4 + 4 + 1 + (c.augmentation.size() + 1) + 1 + 1);
    }
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  struct Entry {
    uint64_t offset, instructions_offset, instructions_size;
  };
  // The FDE with the longest program (room to write crafted programs into).
  static const Entry& roomiest() {
    const Entry* best = &fdes_.front();
    for (const Entry& e : fdes_)
      if (e.instructions_size > best->instructions_size) best = &e;
    return *best;
  }
  // A copy of the file with `program` (padded with DW_CFA_nop) as the roomiest FDE's program.
  static std::vector<uint8_t> with_program(const std::vector<uint8_t>& program) {
    const Entry& e = roomiest();
    std::vector<uint8_t> b = bytes_;
    if (program.size() > e.instructions_size) return {};
    uint64_t at = section_offset_ + e.instructions_offset;
    std::fill(b.begin() + long(at), b.begin() + long(at + e.instructions_size), 0);
    std::copy(program.begin(), program.end(), b.begin() + long(at));
    return b;
  }

  // Compiles `bytes` (as file `name`) with both register sets and checks the outcome: a one-line
  // error naming the file (and an offset if `want_offset`), or an object that verifies. Prints
  // one line per case. Returns "error", "compiled" or "mixed".
  static std::string check(const std::string& name, const std::vector<uint8_t>& bytes,
                           bool want_offset = false, const std::string& want_error = "") {
    std::string path = *dir_ / name;
    test::write_file(path, bytes);
    std::set<std::string> kinds;
    std::string line = "[hostile] " + name + ":";
    for (RegisterSet set : {RegisterSet::Minimal, RegisterSet::CalleeSaved}) {
      SCOPED_TRACE(fmt::format("{} ({})", name, set_name(set)));
      Outcome o = compile_isolated(path, *dir_ / fmt::format("{}.{}.so", name, set_name(set)), set);
      line += fmt::format(" [{}] ", set_name(set));
      EXPECT_FALSE(o.crashed) << o.crash;
      if (o.crashed) {
        kinds.insert("crash");
        line += "CRASH " + o.crash;
        continue;
      }
      if (o.compiled) {
        kinds.insert("compiled");
        line += fmt::format("compiled: {} checks, {} agree, {} both refuse, {} fallback, {} "
                            "mismatches",
                            o.checks, o.agreed, o.both_failed, o.fallbacks, o.mismatches);
        EXPECT_EQ(o.mismatches, 0u) << join(o.mismatch_list);
        EXPECT_GT(o.checks, 0u);
        EXPECT_TRUE(want_error.empty()) << "expected an error containing '" << want_error << "'";
      } else {
        kinds.insert("error");
        line += "error: " + o.error.substr(std::min(o.error.size(), path.size()));
        EXPECT_EQ(o.error.find('\n'), std::string::npos) << o.error;
        EXPECT_EQ(o.error.rfind(path, 0), 0u) << "does not start with the file name: " << o.error;
        if (want_offset) {
          EXPECT_NE(o.error.find(".eh_frame+0x"), std::string::npos) << o.error;
        }
        if (!want_error.empty()) {
          EXPECT_NE(o.error.find(want_error), std::string::npos) << o.error;
        }
      }
    }
    std::printf("%s\n", line.c_str());
    return kinds.size() == 1 ? *kinds.begin() : "mixed";
  }

  static TempDir* dir_;
  static std::string source_, setup_error_;
  static std::vector<uint8_t> bytes_;
  static uint64_t section_offset_, section_size_;
  static std::vector<Entry> cies_, fdes_;
  static std::vector<uint64_t> def_cfa_offsets_, ra_offsets_;
};
TempDir* HostileCompile::dir_ = nullptr;
std::string HostileCompile::source_, HostileCompile::setup_error_;
std::vector<uint8_t> HostileCompile::bytes_;
uint64_t HostileCompile::section_offset_ = 0, HostileCompile::section_size_ = 0;
std::vector<HostileCompile::Entry> HostileCompile::cies_, HostileCompile::fdes_;
std::vector<uint64_t> HostileCompile::def_cfa_offsets_, HostileCompile::ra_offsets_;

TEST_F(HostileCompile, UntouchedBaseline) {
  EXPECT_EQ(check("baseline", bytes_), "compiled");
  EXPECT_GE(roomiest().instructions_size, 16u);
}

TEST_F(HostileCompile, FlippedCfaOffsets) {
  ASSERT_FALSE(def_cfa_offsets_.empty());
  // Each DW_CFA_def_cfa_offset operand's low bits flipped (the LEB128 keeps its length).
  for (uint8_t mask : {uint8_t(0x08), uint8_t(0x28), uint8_t(0x7f)}) {
    std::vector<uint8_t> b = bytes_;
    for (uint64_t off : def_cfa_offsets_)
      b[section_offset_ + off + 1] ^= mask;
    check(fmt::format("cfa_offsets_{:02x}", mask), b);
  }
  // The CIE's DW_CFA_def_cfa: register and offset bytes.
  for (const Entry& c : cies_) {
    if (c.instructions_size < 3) continue;
    uint64_t at = section_offset_ + c.instructions_offset;
    if (bytes_[at] != 0x0c) continue;
    std::vector<uint8_t> b = bytes_;
    b[at + 1] = 0x7f; // CFA based on register 127
    check(fmt::format("cie_{:x}_cfa_reg127", c.offset), b);
    b = bytes_;
    b[at + 2] = 0x7f; // CFA = rsp + 127
    check(fmt::format("cie_{:x}_cfa_off127", c.offset), b);
    b = bytes_;
    b[at + 1] = 0x10; // CFA based on rip
    check(fmt::format("cie_{:x}_cfa_rip", c.offset), b);
  }
}

TEST_F(HostileCompile, UnknownOpcodes) {
  const Entry& e = roomiest();
  for (uint8_t op : {uint8_t(0x3f), uint8_t(0x1d), uint8_t(0x2d), uint8_t(0x3c)}) {
    std::vector<uint8_t> b = bytes_;
    b[section_offset_ + e.instructions_offset] = op;
    std::string kind = check(fmt::format("opcode_{:02x}", op), b, true);
    if (op != 0x2d) { // DW_CFA_GNU_window_save is a known (SPARC/AArch64) opcode
      EXPECT_EQ(kind, "error") << "opcode " << int(op);
    }
  }
  EXPECT_EQ(check("restore_without_remember", with_program({0x0b}), true), "error");
}

TEST_F(HostileCompile, HugeRegisterNumbersAndOperands) {
  struct Case {
    const char* name;
    std::vector<uint8_t> program;
  };
  const std::vector<Case> cases = {
      {"def_cfa_reg_2p32", {0x0c, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x08}},
      {"def_cfa_reg_200", {0x0c, 0xc8, 0x01, 0x08}},
      {"offset_ext_reg_2p31", {0x05, 0x80, 0x80, 0x80, 0x80, 0x08, 0x01}},
      {"offset_ext_reg_17", {0x05, 0x11, 0x01}},
      {"register_rip_from_r200", {0x09, 0x10, 0xc8, 0x01}},
      {"register_rbx_from_rip", {0x09, 0x03, 0x10}},
      {"def_cfa_reg_rip", {0x0d, 0x10}},
      {"def_cfa_off_2p64m1",
       {0x0c, 0x07, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
      {"def_cfa_offset_2p63", {0x0e, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
      {"def_cfa_sf_neg", {0x12, 0x07, 0x40}},
      {"offset_ext_sf_rip_huge",
       {0x11, 0x10, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x7f}},
      {"val_offset_rsp", {0x14, 0x07, 0x02}},
      {"undefined_rsp", {0x07, 0x07}},
      {"undefined_rbp_r12", {0x07, 0x06, 0x07, 0x0c}},
      {"same_value_rip", {0x08, 0x10}},
      {"advance_past_end", {0x04, 0xff, 0xff, 0xff, 0x7f, 0x0e, 0x10}},
      {"set_loc_backwards", {0x01, 0x00, 0x00, 0x00, 0x00, 0x0e, 0x10}},
      {"args_size_huge", {0x2e, 0xff, 0xff, 0xff, 0xff, 0x0f}},
  };
  for (const Case& c : cases) {
    auto b = with_program(c.program);
    ASSERT_FALSE(b.empty()) << c.name << " does not fit";
    check(c.name, b);
  }
  // The CIEs' return-address column: rbx, rsp, a huge (one-byte) register, rax.
  for (uint64_t off : ra_offsets_) {
    for (uint8_t ra : {uint8_t(3), uint8_t(7), uint8_t(0x7f), uint8_t(0)}) {
      std::vector<uint8_t> b = bytes_;
      if (b[section_offset_ + off] != 16) continue; // not where we expected the field
      b[section_offset_ + off] = ra;
      check(fmt::format("cie_{:x}_ra_{}", off, ra), b);
    }
  }
}

TEST_F(HostileCompile, ExpressionsWithLoopsDivisionAndBadStacks) {
  struct Case {
    const char* name;
    std::vector<uint8_t> program;
  };
  const std::vector<Case> cases = {
      // DW_CFA_def_cfa_expression
      {"cfa_skip_to_itself", {0x0f, 3, 0x2f, 0xfd, 0xff}},
      {"cfa_bra_loop", {0x0f, 4, 0x31, 0x28, 0xfc, 0xff}},
      {"cfa_div_by_zero", {0x0f, 4, 0x77, 0x00, 0x30, 0x1b}},
      {"cfa_mod_by_zero", {0x0f, 4, 0x77, 0x00, 0x30, 0x1d}},
      {"cfa_div", {0x0f, 4, 0x77, 0x10, 0x32, 0x1b}},
      {"cfa_min_div_minus1", {0x0f, 12, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x11, 0x7f, 0x1b}},
      {"cfa_min_mod_minus1", {0x0f, 12, 0x0f, 0, 0, 0, 0, 0, 0, 0, 0x80, 0x11, 0x7f, 0x1d}},
      {"cfa_empty", {0x0f, 0}},
      {"cfa_drop_empty", {0x0f, 1, 0x13}},
      {"cfa_pick_255", {0x0f, 3, 0x30, 0x15, 0xff}},
      {"cfa_deref_null", {0x0f, 2, 0x30, 0x06}},
      {"cfa_shifts", {0x0f, 8, 0x77, 0x00, 0x08, 0x80, 0x24, 0x08, 0x41, 0x26}},
      {"cfa_length_past_end", {0x0f, 0x7f, 0x77, 0x00}},
      {"cfa_unknown_op", {0x0f, 1, 0xe0}},
      {"cfa_breg_untracked", {0x0f, 2, 0x70, 0x08}},
      {"cfa_deep_stack", {0x0f, 20,   0x30, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12,
                          0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12, 0x12}},
      // DW_CFA_expression / DW_CFA_val_expression
      {"rbx_div_by_zero", {0x10, 0x03, 4, 0x77, 0x00, 0x30, 0x1b}},
      {"rip_bra_loop", {0x10, 0x10, 4, 0x31, 0x28, 0xfc, 0xff}},
      {"rip_val_deref_null", {0x16, 0x10, 2, 0x30, 0x06}},
      {"rbp_val_underflow", {0x16, 0x06, 3, 0x13, 0x13, 0x13}},
      {"rsp_val_cfa", {0x16, 0x07, 1, 0x9c}},
      {"rbx_pick_255", {0x10, 0x03, 2, 0x15, 0xff}},
      {"r12_swap_rot_empty", {0x10, 0x0c, 2, 0x16, 0x17}},
      {"huge_reg_expression", {0x10, 0xff, 0xff, 0x03, 2, 0x30, 0x06}},
      {"rbx_bregx_huge", {0x10, 0x03, 7, 0x92, 0xff, 0xff, 0xff, 0xff, 0x0f, 0x00}},
  };
  for (const Case& c : cases) {
    auto b = with_program(c.program);
    ASSERT_FALSE(b.empty()) << c.name << " does not fit";
    check(c.name, b);
  }
}

TEST_F(HostileCompile, RandomByteFlips) {
  std::mt19937_64 rng(20240611);
  int errors = 0, compiled = 0;
  for (int round = 0; round < 60; ++round) {
    std::vector<uint8_t> b = bytes_;
    for (int k = 0; k < 3; ++k) {
      uint64_t at = section_offset_ + rng() % section_size_;
      b[at] ^= uint8_t(1u << (rng() % 8));
    }
    std::string kind = check(fmt::format("flips_{}", round), b);
    errors += kind == "error";
    compiled += kind == "compiled";
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(compiled, 0);
}

// ---------------------------------------------------------------------------------------------
// The ABI header is valid C99 and C++ on its own.

TEST(AbiHeader, CompilesAsStrictCAndCxx) {
  TempDir dir;
  const std::string src =
      "#include \"ehelf/eh_elf.h\"\n"
      "int use(ehelf_context_t* c, ehelf_deref_fn d);\n"
      "int use(ehelf_context_t* c, ehelf_deref_fn d) {\n"
      "  const struct ehelf_info* i = &ehelf_eh_elf_info;\n"
      "  c->flags |= EHELF_VALID(EHELF_RSP) | EHELF_FLAG_SIGNAL_FRAME;\n"
      "  return ehelf_unwind_local(i->pc_low, c) + ehelf_unwind_remote(0, c, d, 0) +\n"
      "         (int)i->abi_version + EHELF_NREGS + EHELF_REGISTERS_CALLEE_SAVED;\n"
      "}\n";
  test::write_file(dir / "use.c", std::vector<uint8_t>(src.begin(), src.end()));
  test::write_file(dir / "use.cpp", std::vector<uint8_t>(src.begin(), src.end()));
  const std::string inc = std::string(EHELF_SOURCE_DIR) + "/include";
  for (const std::string& cmd :
       {fmt::format("cc -std=c99 -Wall -Werror -pedantic -I{} -c {} -o {}", inc, dir / "use.c",
                    dir / "c99.o"),
        fmt::format("cc -std=c99 -Wall -Wextra -Werror -pedantic -I{} -c {} -o {}", inc,
                    dir / "use.c", dir / "c99x.o"),
        fmt::format("c++ -Wall -Werror -I{} -c {} -o {}", inc, dir / "use.cpp", dir / "cxx.o"),
        fmt::format("c++ -std=c++11 -Wall -Wextra -Werror -pedantic -I{} -c {} -o {}", inc,
                    dir / "use.cpp", dir / "cxx11.o")}) {
    std::string log = test::run_command(cmd + " 2>&1; echo \"exit=$?\"");
    EXPECT_NE(log.find("exit=0"), std::string::npos) << cmd << "\n" << log;
  }
  // The C++ object refers to the unmangled names.
  std::string syms = test::run_command("nm " + (dir / "cxx.o"));
  EXPECT_NE(syms.find(" U ehelf_unwind_local"), std::string::npos) << syms;
  EXPECT_NE(syms.find(" U ehelf_eh_elf_info"), std::string::npos) << syms;
}

} // namespace
} // namespace ehelf
