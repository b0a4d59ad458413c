// check::replay_check: a recorded trace judged again, module by module, through RowCheck.
#include "check/replay.hpp"

#include <chrono>
#include <deque>
#include <fmt/format.h>
#include <memory>
#include <unordered_map>

#include "check/row_check.hpp"
#include "check/trace.hpp"
#include "model/registers.hpp"
#include "runtime/symbolize.hpp"
#include "support/safe_text.hpp"
#include "x86/elf_code.hpp"

namespace ehelf::check {
namespace {

std::string hex(std::span<const uint8_t> bytes) {
  std::string out;
  for (uint8_t b : bytes)
    out += fmt::format("{:02x}", b);
  return out;
}

bool names_module(const std::string& name, const std::string& path) {
  if (name == path) return true;
  size_t slash = path.rfind('/');
  return slash != std::string::npos && name == path.substr(slash + 1);
}

class Replay final : SiteNames {
public:
  explicit Replay(const ReplayOptions& options)
      : options_(options), judge_(*this), used_(options.tables.size()) {
    policy_.compiled = false; // the tables as the live check loads them
    policy_.compact = false;
    policy_.whole_table = true;
  }
  Result<CheckResult> run();

private:
  // A module of the trace: its own file (names, instructions) and the tables it is judged by.
  struct ReplayModule {
    Module module;
    std::shared_ptr<const ModuleData> tables;
  };

  std::string function(const Site& site) override {
    return format_symbol(names_.name(map_, *site.module, site.pc));
  }
  std::string instruction(const Site& site) override {
    const ElfFile* elf = site.module->data->elf.get();
    return elf ? x86::instruction_text(*elf, site.pc - site.module->bias) : "?";
  }
  Status add_module(const TraceModule& recorded, const std::string& trace_name);
  // Each file and each distinct image is loaded once, however many records name it: a trace of
  // a few bytes per record must not cost a module's tables per record.
  std::shared_ptr<const ModuleData> load_file(const std::string& path);
  std::shared_ptr<const ModuleData> load_image(const TraceModule& recorded);

  const ReplayOptions& options_;
  LoadPolicy policy_;
  RowCheck judge_;
  Symbolizer names_;
  ModuleMap map_; // empty: every module's data is loaded here, Symbolizer only asks it for that
  std::deque<ReplayModule> modules_;
  std::vector<bool> used_;                                                    // per --tables entry
  std::unordered_map<std::string, std::shared_ptr<const ModuleData>> files_;  // by path
  std::unordered_map<std::string, std::shared_ptr<const ModuleData>> images_; // by their bytes
};

std::shared_ptr<const ModuleData> Replay::load_file(const std::string& path) {
  auto [it, added] = files_.try_emplace(path);
  if (added) it->second = load_module(path, policy_);
  return it->second;
}

std::shared_ptr<const ModuleData> Replay::load_image(const TraceModule& recorded) {
  auto [it, added] = images_.try_emplace(
      std::string(reinterpret_cast<const char*>(recorded.image.data()), recorded.image.size()));
  if (added) it->second = load_module_image(recorded.image, recorded.path, policy_);
  return it->second;
}

Status Replay::add_module(const TraceModule& recorded, const std::string& trace_name) {
  ReplayModule rm;
  Module& m = rm.module;
  m.path = recorded.path;
  m.bias = recorded.bias;
  m.vdso = !recorded.image.empty();
  const std::string path = message_safe(recorded.path);
  // What is wrong with a module: a file names itself; an image is part of the trace, which is
  // named with the record's offset.
  auto module_error = [&](std::string message) {
    if (!m.vdso) return Error::plain(fmt::format("{}: {}", path, message));
    Error e = Error::plain(fmt::format("module image {}: {}", path, message));
    e.file = trace_name;
    e.offset = recorded.record_offset;
    e.has_offset = true;
    return e;
  };
  std::shared_ptr<const ModuleData> own = m.vdso ? load_image(recorded) : load_file(recorded.path);
  if (!own->elf)
    return module_error(fmt::format("module of the trace: {}", message_safe(own->error)));
  const auto id = own->elf->build_id();
  const std::span<const uint8_t> now = id ? *id : std::span<const uint8_t>();
  if (!std::equal(now.begin(), now.end(), recorded.build_id.begin(), recorded.build_id.end()))
    return module_error(fmt::format("build id {} where the trace recorded {} (the file changed "
                                    "since the recording)",
                                    now.empty() ? "none" : hex(now),
                                    recorded.build_id.empty() ? "none" : hex(recorded.build_id)));
  m.data = own;
  rm.tables = own;
  for (size_t i = 0; i < options_.tables.size(); ++i) {
    const auto& [module, file] = options_.tables[i];
    if (!names_module(module, recorded.path)) continue;
    std::shared_ptr<const ModuleData> other = load_file(file);
    if (!other->table)
      return Error::plain(
          fmt::format("{}: no unwind tables ({})", message_safe(file),
                      other->error.empty() ? "none found" : message_safe(other->error)));
    rm.tables = std::move(other);
    used_[i] = true;
    break;
  }
  modules_.push_back(std::move(rm));
  return Ok{};
}

Result<CheckResult> Replay::run() {
  auto t0 = std::chrono::steady_clock::now();
  auto opened = TraceReader::open(options_.trace);
  if (!opened) return std::move(opened).error();
  TraceReader& trace = **opened;
  for (;;) {
    auto event = trace.next();
    if (!event) return std::move(event).error();
    if (*event == TraceReader::Event::end) break;
    if (*event == TraceReader::Event::module) {
      if (Status st = add_module(trace.modules().back(), trace.name()); !st.ok())
        return std::move(st).error();
      continue;
    }
    const ReplayModule& rm = modules_[trace.module()];
    if (!rm.tables->table) continue; // as the live check: a module without tables is not judged
    const Site site{&rm.module, rm.tables.get(), rm.tables->table->find(trace.svma()),
                    trace.regs().get(x86_64::RIP), trace.tid()};
    RecordedMemory memory(trace.reads());
    judge_.check(site, trace.regs(), trace.frame(), memory, &memory.unknown);
  }
  for (size_t i = 0; i < options_.tables.size(); ++i)
    if (!used_[i])
      return Error::plain(fmt::format("--tables {}={}: no module of the trace is {}",
                                      options_.tables[i].first, options_.tables[i].second,
                                      options_.tables[i].first));
  CheckSummary& s = judge_.result().summary;
  const CheckSummary& r = trace.recorded();
  s.steps = r.steps;
  s.threads = r.threads;
  s.calls = r.calls;
  s.resyncs = r.resyncs;
  s.signals = r.signals;
  s.blocks = r.blocks;
  s.block_mismatches = r.block_mismatches;
  s.unchecked_signal_steps = r.unchecked_signal_steps;
  s.step_limit = r.step_limit;
  s.exit_status = r.exit_status;
  s.exec_detached = r.exec_detached;
  s.processes = r.processes;
  s.execs = r.execs;
  s.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return judge_.finish();
}

} // namespace

Result<CheckResult> replay_check(const ReplayOptions& options) {
  Replay replay(options);
  return replay.run();
}

} // namespace ehelf::check
