// Per-frame cost of one unwind step through a compiled eh_elf (table and tree lookups, local and
// remote variants) against the interpreter (UnwindTable::find + evaluate) on the same rows.
// Usage: bench_eh_elf_lookup SOURCE.so TABLE_EH_ELF.so [TREE_EH_ELF.so] [--json FILE]
#include <algorithm>
#include <chrono>
#include <cstring>
#include <fmt/format.h>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <vector>

#include "eh_elf/eh_elf_object.hpp"
#include "dwarf/module_cfi.hpp"

using namespace ehelf;

namespace {

// A fake stack: every word readable, holding an address-derived value.
std::vector<uint64_t> g_stack(1 << 16);

int deref(uint64_t addr, uint64_t* value, void*) {
  *value = addr * 0x9e3779b97f4a7c15ULL;
  return 0;
}

class FlatMemory final : public MemoryReader {
public:
  bool read(uint64_t addr, void* out, size_t size) override {
    uint64_t v = addr * 0x9e3779b97f4a7c15ULL;
    std::memcpy(out, &v, size < 8 ? size : 8);
    return true;
  }
};

template <class F> double ns_per_call(size_t n, F&& f) {
  // Best of 5 runs: the machine is shared, the minimum is the least disturbed.
  double best = 1e30;
  for (int rep = 0; rep < 5; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i) f(i);
    double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0)
                    .count();
    best = std::min(best, ns / double(n));
  }
  return best;
}

volatile uint64_t g_sink;

} // namespace

int main(int argc, char** argv) {
  std::string json_path;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--json" && i + 1 < argc) json_path = argv[++i];
    else args.push_back(argv[i]);
  }
  if (args.size() < 2) {
    fmt::print(stderr, "usage: bench_eh_elf_lookup SOURCE TABLE_EH_ELF [TREE_EH_ELF] [--json F]\n");
    return 2;
  }
  auto m = load_module_cfi(args[0]);
  if (!m) {
    fmt::print(stderr, "{}\n", m.error().to_string());
    return 1;
  }
  auto table = build_unwind_table(*m);
  if (!table) {
    fmt::print(stderr, "{}\n", table.error().to_string());
    return 1;
  }
  // Sample pcs: one per range (cold: shuffled), and a single pc (hot).
  std::vector<uint64_t> pcs;
  for (const auto& r : table->ranges()) pcs.push_back(r.begin + (r.end - r.begin) / 2);
  std::mt19937_64 rng(42);
  std::shuffle(pcs.begin(), pcs.end(), rng);
  const size_t n = 2'000'000;
  uint64_t stack_lo = reinterpret_cast<uint64_t>(g_stack.data());
  uint64_t sp = stack_lo + 8 * (g_stack.size() / 2);

  nlohmann::json out;
  out["source"] = args[0];
  fmt::print("{:<34} {:>12} {:>12}\n", "unwind step (ns per call)", "same pc", "random pcs");
  auto row = [&](const std::string& name, auto&& step) {
    uint64_t hot_pc = pcs[0];
    double hot = ns_per_call(n, [&](size_t) { step(hot_pc); });
    double cold = ns_per_call(n, [&](size_t i) { step(pcs[i % pcs.size()]); });
    fmt::print("{:<34} {:>12.1f} {:>12.1f}\n", name, hot, cold);
    out["results"].push_back({{"name", name}, {"same_pc_ns", hot}, {"random_pcs_ns", cold}});
  };

  FlatMemory mem;
  row("interpreter (find + evaluate)", [&](uint64_t pc) {
    const TableRange* r = table->find(pc);
    if (!r) return;
    RegisterState regs;
    regs.set(x86_64::RSP, sp);
    regs.set(x86_64::RBP, sp + 64);
    regs.set(x86_64::RBX, 1);
    regs.set(x86_64::RIP, pc);
    auto s = table->evaluate(r->row, regs, mem);
    g_sink = s ? s->cfa : 0;
  });
  const char* names[] = {"table", "tree"};
  for (size_t k = 1; k < args.size() && k <= 2; ++k) {
    auto obj = EhElfObject::load(args[k]);
    if (!obj) {
      fmt::print(stderr, "{}\n", obj.error().to_string());
      return 1;
    }
    const EhElfObject& o = **obj;
    for (bool remote : {false, true}) {
      row(fmt::format("eh_elf {} lookup, {}", names[k - 1], remote ? "remote" : "local"),
          [&](uint64_t pc) {
            ehelf_context_t ctx{};
            ctx.regs[EHELF_RSP] = sp;
            ctx.regs[EHELF_RBP] = sp + 64;
            ctx.regs[EHELF_RIP] = pc;
            ctx.flags = 0xf;
            ctx.stack_lo = stack_lo;
            ctx.stack_hi = stack_lo + 8 * g_stack.size();
            int rc = remote ? o.unwind_remote(pc, &ctx, deref, nullptr) : o.unwind_local(pc, &ctx);
            g_sink = ctx.regs[EHELF_RIP] + rc;
          });
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << out.dump(1) << "\n";
  return 0;
}
