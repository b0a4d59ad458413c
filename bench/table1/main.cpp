// The paper's Table 1 on the same samples: reads a `perf record --call-graph dwarf` recording
// once, then every peer walks every sample's user stack from the same registers and stack copy.
// Per peer: frames, setup time, unwinding time (first pass, then the best of --rounds more),
// walks that ended before the end of the stack and why, and each sample's frames compared with
// the ehelf fast walk's (same, shorter, longer, different) by category.
//
//   table1 PERF_DATA [--workload NAME] [--json OUT] [--rounds N] [--limit SAMPLES]
//          [--stride K] [--max-depth N] [--only PEER] [--callgrind] [--list-files]
//
// --max-depth N: frames per walk at most (every peer). By default as many as the largest stack
// copy holds return addresses (its size / 8, and the sample's ip): no walk of a sample can have
// more frames whose return addresses it read, so none is cut short (ehelf perf's own limit is
// 65,536).
// --stride K keeps every K-th sample (callgrind runs: a subset spread over the whole recording
// rather than its first samples, which are the processes' start). --list-files prints the module
// files the samples' processes map (what the compiled backend needs eh_elfs for) and exits.
//
// --callgrind (with --only): no timing; one uncollected pass (warms the caches, as the timed
// runs' first pass does), then CALLGRIND_TOGGLE_COLLECT around one more pass; prints the frames
// of that pass as JSON. Run under `valgrind --tool=callgrind --collect-atstart=no`.
#include <valgrind/callgrind.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "peer.hpp"

namespace table1 {

const char* Stop::text() const {
  if (reason) return reason;
  if (why == ehelf::StopReason::DepthLimit) return kDepthLimit;
  return ehelf::stop_reason_name(why).data();
}

namespace {

using Clock = std::chrono::steady_clock;
using nlohmann::json;

struct Options {
  std::string data, workload, json_out, only;
  size_t rounds = 3, limit = 0, stride = 1, max_depth = 0; // 0: from the copies
  bool callgrind = false, list_files = false;
};

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr,
               "table1: %s\nusage: table1 PERF_DATA [--workload NAME] [--json OUT] [--rounds N] "
               "[--limit SAMPLES] [--stride K] [--max-depth N] [--only PEER] [--callgrind] "
               "[--list-files]\n",
               why);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--workload")
      o.workload = value();
    else if (a == "--json")
      o.json_out = value();
    else if (a == "--rounds")
      o.rounds = std::stoul(value());
    else if (a == "--limit")
      o.limit = std::stoul(value());
    else if (a == "--max-depth")
      o.max_depth = std::stoul(value());
    else if (a == "--only")
      o.only = value();
    else if (a == "--stride")
      o.stride = std::stoul(value());
    else if (a == "--callgrind")
      o.callgrind = true;
    else if (a == "--list-files")
      o.list_files = true;
    else if (!a.empty() && a[0] == '-')
      usage(("unknown option " + a).c_str());
    else
      o.data = a;
  }
  if (o.data.empty()) usage("no recording given");
  if (o.callgrind && o.only.empty()) usage("--callgrind needs --only PEER");
  if (o.stride == 0) usage("--stride must be positive");
  return o;
}

// One peer's walks of every sample (from the first pass).
struct Walks {
  std::vector<uint64_t> pcs; // every sample's pcs, concatenated
  std::vector<size_t> begin; // sample i: pcs[begin[i], begin[i+1])
  std::vector<Stop> stops;
  std::span<const uint64_t> of(size_t i) const {
    return {pcs.data() + begin[i], begin[i + 1] - begin[i]};
  }
};

// One pass over every sample; with `walks`, records them.
uint64_t pass(Peer& peer, const Recording& rec, size_t max_depth, Walks* walks) {
  static std::vector<uint64_t> pcs;
  pcs.resize(max_depth);
  uint64_t frames = 0;
  if (walks) walks->begin.push_back(0);
  for (const Sample& s : rec.samples) {
    Stop stop;
    const size_t n = peer.unwind(s, pcs.data(), max_depth, stop);
    frames += n;
    if (walks) {
      walks->pcs.insert(walks->pcs.end(), pcs.begin(), pcs.begin() + n);
      walks->begin.push_back(walks->pcs.size());
      walks->stops.push_back(stop);
    }
  }
  return frames;
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The section holding a pc (of a frame after the first: the call before the return address).
std::string section_of(const Maps& maps, uint64_t pc, bool return_address) {
  const ModuleRef* m = maps.find(pc);
  if (!m) return "no module";
  const uint64_t svma = pc - m->bias - (return_address ? 1 : 0);
  for (const ehelf::Section& sec : m->file->elf->sections())
    if ((sec.flags & 4 /* SHF_EXECINSTR */) && svma >= sec.addr && svma - sec.addr < sec.size)
      return std::string(sec.name);
  return "no section";
}

// Where a pc is, for examples: "file+0xoffset (section)" or "no module".
std::string where(const Maps& maps, uint64_t pc, bool return_address) {
  const ModuleRef* m = maps.find(pc);
  if (!m) return "no module";
  std::string base = m->file->path.substr(m->file->path.rfind('/') + 1);
  char buf[32];
  std::snprintf(buf, sizeof buf, "+0x%llx", static_cast<unsigned long long>(pc - m->bias));
  return base + buf + " (" + section_of(maps, pc, return_address) + ")";
}

// Each sample's frames against the reference walk's (the ehelf fast walk).
json compare(const Recording& rec, const Walks& ref, const Walks& peer) {
  uint64_t same = 0, differ = 0;
  std::map<std::string, uint64_t> shorter, longer, differ_kind, stopped_in;
  json examples = json::array(), prefix_examples = json::array();
  for (size_t i = 0; i < rec.samples.size(); ++i) {
    auto a = ref.of(i), b = peer.of(i);
    const size_t common = std::min(a.size(), b.size());
    size_t k = 0;
    while (k < common && a[k] == b[k])
      ++k;
    if (k == common && a.size() == b.size()) {
      ++same;
    } else if (k == common) {
      // One walk is a prefix of the other: where the shorter one stopped, and why.
      const bool peer_shorter = b.size() < a.size();
      ++(peer_shorter ? shorter : longer)[(peer_shorter ? peer : ref).stops[i].text()];
      const auto& stopped = peer_shorter ? b : a;
      const Maps& maps = *rec.samples[i].maps;
      if (!stopped.empty())
        ++stopped_in[(peer_shorter ? "peer stopped in " : "reference stopped in ") +
                     section_of(maps, stopped.back(), stopped.size() > 1)];
      if (prefix_examples.size() < 5 && !stopped.empty())
        prefix_examples.push_back({{"sample", i},
                                   {"shorter", peer_shorter ? "peer" : "reference"},
                                   {"last_frame", where(maps, stopped.back(), stopped.size() > 1)},
                                   {"frames", {a.size(), b.size()}}});
    } else {
      ++differ;
      const Maps& maps = *rec.samples[i].maps;
      const bool ours_in = maps.find(a[k]), theirs_in = maps.find(b[k]);
      std::string kind = ours_in && theirs_in ? "both pcs in modules"
                         : ours_in            ? "the peer's pc in no module"
                         : theirs_in          ? "the reference's pc in no module"
                                              : "neither pc in a module";
      ++differ_kind[kind];
      if (examples.size() < 5)
        examples.push_back({{"sample", i},
                            {"frame", k},
                            {"reference", where(maps, a[k], k > 0)},
                            {"peer", where(maps, b[k], k > 0)},
                            {"kind", kind}});
    }
  }
  return {{"same", same},
          {"peer_shorter", shorter},
          {"peer_longer", longer},
          {"differ", differ},
          {"differ_kinds", differ_kind},
          {"differ_examples", examples},
          {"prefix_examples", prefix_examples},
          {"prefix_stopped_in", stopped_in}};
}

int run(const Options& o) {
  Recording rec = read_recording(o.data, o.limit);
  if (o.list_files) {
    for (const auto& f : rec.files)
      std::printf("%s\n", f->path.c_str());
    return 0;
  }
  if (o.stride > 1) {
    std::vector<Sample> kept;
    for (size_t i = 0; i < rec.samples.size(); i += o.stride)
      kept.push_back(rec.samples[i]);
    rec.samples = std::move(kept);
  }
  size_t max_depth = o.max_depth;
  if (max_depth == 0) {
    size_t largest = 0;
    for (const Sample& smp : rec.samples)
      largest = std::max(largest, smp.stack.size());
    max_depth = largest / 8 + 1;
  }
  std::vector<std::unique_ptr<Peer>> peers;
  add_ehelf_peers(peers);
  add_libunwind_peers(peers);
  add_dwfl_peers(peers);
  if (!o.only.empty()) {
    std::erase_if(peers, [&](const auto& p) { return o.only != p->name(); });
    if (peers.empty()) usage(("no peer named " + o.only).c_str());
  }

  if (o.callgrind) {
    Peer& peer = *peers.front();
    for (const auto& maps : rec.maps)
      peer.prepare(*maps);
    pass(peer, rec, max_depth, nullptr);
    CALLGRIND_TOGGLE_COLLECT;
    const uint64_t frames = pass(peer, rec, max_depth, nullptr);
    CALLGRIND_TOGGLE_COLLECT;
    std::printf("%s\n", json({{"peer", peer.name()},
                              {"samples", rec.samples.size()},
                              {"stride", o.stride},
                              {"frames", frames}})
                            .dump()
                            .c_str());
    return 0;
  }

  json out;
  out["workload"] = o.workload;
  out["recording"] = o.data;
  out["samples_recorded"] = rec.all_samples;
  out["samples"] = rec.samples.size();
  out["stride"] = o.stride;
  out["max_depth"] = max_depth;
  out["rounds"] = o.rounds;
  std::map<std::string, uint64_t> missing;
  for (const auto& maps : rec.maps)
    for (const auto& [start, path] : maps->missing)
      ++missing[path];
  out["mappings_without_file"] = missing;
  std::vector<Walks> walks(peers.size());
  json rows = json::array();
  for (size_t p = 0; p < peers.size(); ++p) {
    Peer& peer = *peers[p];
    auto t = Clock::now();
    for (const auto& maps : rec.maps)
      peer.prepare(*maps);
    const double setup = seconds_since(t);
    t = Clock::now();
    const uint64_t frames = pass(peer, rec, max_depth, &walks[p]);
    const double first = seconds_since(t);
    std::vector<double> times;
    for (size_t r = 0; r < o.rounds; ++r) {
      t = Clock::now();
      pass(peer, rec, max_depth, nullptr);
      times.push_back(seconds_since(t));
    }
    // The best round: on a shared machine the other rounds measure the neighbours too.
    std::sort(times.begin(), times.end());
    const double steady = times.empty() ? first : times.front();
    const double median = times.empty() ? first : times[times.size() / 2];
    std::map<std::string, uint64_t> early;
    for (const Stop& s : walks[p].stops)
      if (!s.end_of_stack) ++early[s.text()];
    uint64_t early_total = 0;
    for (const auto& [why, n] : early)
      early_total += n;
    rows.push_back({{"peer", peer.name()},
                    {"frames", frames},
                    {"setup_s", setup},
                    {"first_pass_s", first},
                    {"steady_s", steady},
                    {"median_s", median},
                    {"ns_per_frame", frames ? steady * 1e9 / double(frames) : 0.0},
                    {"ended_early", early_total},
                    {"ended_early_why", early},
                    {"note", peer.note()}});
    std::fprintf(stderr, "%-36s %9llu frames  %8.3f s first  %8.3f s steady  %7.1f ns/frame\n",
                 peer.name(), static_cast<unsigned long long>(frames), first, steady,
                 frames ? steady * 1e9 / double(frames) : 0.0);
  }
  for (size_t p = 0; p < peers.size(); ++p)
    rows[p]["vs_fast_walk"] = compare(rec, walks[0], walks[p]);
  out["peers"] = rows;
  if (!o.json_out.empty()) {
    std::ofstream f(o.json_out);
    f << out.dump(2) << "\n";
    if (!f) {
      std::fprintf(stderr, "table1: cannot write %s\n", o.json_out.c_str());
      return 1;
    }
  } else {
    std::printf("%s\n", out.dump(2).c_str());
  }
  return 0;
}

} // namespace
} // namespace table1

int main(int argc, char** argv) {
  return table1::run(table1::parse(argc, argv));
}
