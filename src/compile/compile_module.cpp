#include "compile/compile_module.hpp"

#include <chrono>
#include <fmt/format.h>

#include "dwarf/module_cfi.hpp"

namespace ehelf {
namespace {

using Clock = std::chrono::steady_clock;
double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

uint64_t section_size(const ElfFile& f, const char* name) {
  const Section* s = f.find_section(name);
  return s ? s->size : 0;
}

} // namespace

Result<CompileReport> compile_module(const std::string& path, const std::string& output,
                                     const CompileOptions& options) {
  CompileReport report;
  report.source = path;
  report.output = output;
  auto phase = [&](std::string_view what) {
    if (options.on_phase) options.on_phase(what);
  };
  auto t0 = Clock::now();
  phase("reading the tables");
  auto module = load_module_cfi(path);
  if (!module) return std::move(module).error();
  if (!module->has_tables())
    return Error::plain("no .eh_frame or .debug_frame to compile").in_file(path);
  auto table = build_unwind_table(*module);
  if (!table) return std::move(table).error();
  if (table->ranges().empty())
    return Error::plain("the unwind tables cover no code (only empty FDEs)").in_file(path);
  report.load_ms = ms_since(t0);

  const ElfFile& elf = *module->elf;
  report.text_rodata = section_size(elf, ".text") + section_size(elf, ".rodata");
  report.eh_frame = section_size(elf, ".eh_frame");
  if (module->debug_frame && !module->eh_frame && !module->debug_elf)
    report.eh_frame = section_size(elf, ".debug_frame");
  report.eh_frame_hdr = section_size(elf, ".eh_frame_hdr");

  auto t1 = Clock::now();
  phase("generating code");
  CodegenOptions cg;
  cg.registers = options.registers;
  cg.lookup = options.lookup;
  auto id = elf.build_id();
  if (id) cg.build_id = *id;
  cg.source_name = path;
  auto source = generate_eh_elf_source(*table, cg, &report.codegen);
  if (!source) return std::move(source).error().in_file(path);
  report.codegen_ms = ms_since(t1);

  auto t2 = Clock::now();
  phase("compiling (cc)");
  // Measured and verified as built, before it is published: `output` may be a device.
  auto inspect = [&](const std::string& built) -> Status {
    report.cc_ms = ms_since(t2);
    auto out = ElfFile::open(built);
    if (!out) return std::move(out).error();
    report.eh_elf_text = section_size(**out, ".text");
    report.eh_elf_rodata = section_size(**out, ".rodata");
    report.eh_elf_file = (*out)->bytes().size();
    if (options.verify) {
      phase("verifying");
      auto object = EhElfObject::load(built, cg.build_id);
      if (!object) return std::move(object).error();
      report.verification = check_eh_elf(*table, **object);
    }
    return Ok{};
  };
  if (auto st = build_shared_object(*source, output, options.toolchain, inspect); !st)
    return std::move(st).error().in_file(path);
  return report;
}

} // namespace ehelf
