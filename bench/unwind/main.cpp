// In-process unwinding benchmark: call chains of a given depth where every level goes through
// glibc's qsort into a generated -O2 -fomit-frame-pointer comparator (workload.h), unwound by
// every peer from the same call site at the chain's leaf.
//
//   hot:  one chain per depth, the same stack unwound over and over (rounds of timed batches,
//         peers interleaved; median and best batch reported).
//   cold: a new chain per sample, built from comparators never used before (new return
//         addresses), each peer's caches flushed before its unwind (see Peer::cold_means); one
//         timed unwind per peer per sample, peers in rotating order.
//
// Modes:
//   (default)      timings, written as JSON (--json FILE)
//   --callgrind    for one peer (--only NAME): instructions of the unwinds only, collection
//                  toggled around them (run under valgrind --tool=callgrind --collect-atstart=no);
//                  one dump per depth and regime, labelled "hot-D" / "cold-D"; frame counts as
//                  JSON (--json FILE)
//   --syscalls     for one peer: marker writes to fd -1 around the unwinds, "begin hot-D" /
//                  "begin cold-D" and "end" (run under strace, count the calls between)
//   --list         peer names
//   --show-frames  print every peer's frames of the hot chains (with dladdr's names)
//   --no-hot, --no-cold  skip a regime (e.g. to profile the other)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <pthread.h>
#include <unistd.h>
#include <unordered_set>
#include <vector>

#include <valgrind/callgrind.h>

#include "peer.hpp"
#include "workload.h"

namespace bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxFrames = 1024;

enum class Mode { Time, Callgrind, Syscalls };

struct Options {
  Mode mode = Mode::Time;
  std::vector<int> depths{10, 30, 100};
  std::string only; // comma-separated peer names
  bool selected(const std::string& name) const {
    if (only.empty()) return true;
    size_t start = 0;
    for (;;) {
      size_t end = only.find(',', start);
      if (only.compare(start, end == std::string::npos ? std::string::npos : end - start, name) == 0)
        return true;
      if (end == std::string::npos) return false;
      start = end + 1;
    }
  }
  std::string json;
  int cold_samples = 250;
  int hot_rounds = 21;
  int batch_us = 1000;
  int cg_hot_iters = 200;
  int cg_cold_samples = 60;
  bool list = false;
  bool show_frames = false;
  bool hot = true, cold = true;
};

// One run of one peer at the leaf.
struct Step {
  Peer* peer = nullptr;
  int iters = 1;
  bool record = true;  // ask for the pc array (frames-found check)
  bool flush = false;  // call peer->flush() first (cold)
  bool timed = false;
  bool collect = false; // toggle callgrind collection around the unwinds
  const char* mark = nullptr; // syscall mode: marker label
  // results
  double ns = 0;
  size_t frames = 0;
  uint64_t pcs[kMaxFrames];
};

// The single call site of every peer's walk: the frames below it are the same for all peers.
__attribute__((noinline)) size_t call_once(Peer* p, uint64_t* pcs, bool record) {
  size_t n = p->once(pcs, kMaxFrames, record);
  asm volatile("" ::: "memory");
  return n;
}

// Inlined into the leaf (one frame fewer under the walks).
__attribute__((always_inline)) inline void run_step(Step& s) {
  if (s.flush && s.peer->flush) s.peer->flush();
  if (s.mark) syscall(SYS_write, -1, s.mark, strlen(s.mark));
  Clock::time_point t0;
  if (s.timed) t0 = Clock::now();
  if (s.collect) CALLGRIND_TOGGLE_COLLECT;
  size_t n = 0;
  for (int i = 0; i < s.iters; ++i) n = call_once(s.peer, s.pcs, s.record);
  if (s.collect) CALLGRIND_TOGGLE_COLLECT;
  if (s.timed) s.ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count();
  if (s.mark) syscall(SYS_write, -1, "end", 3);
  s.frames = n;
}

// The thread every chain runs on, so that the frames under a chain are few and always the same:
// clone3, start_thread, thread_main, wl_run. Jobs are posted from the main thread one at a time.
class ChainThread {
public:
  ChainThread() { pthread_create(&thread_, nullptr, &ChainThread::thread_main, this); }
  ~ChainThread() {
    post(nullptr);
    pthread_join(thread_, nullptr);
  }
  void call(std::function<void()> fn) {
    Job j;
    j.fn = std::move(fn);
    post(&j);
  }
  int chain(int levels, const int* plan, const int* sizes, void (*leaf)(void*), void* arg) {
    Job j;
    j.levels = levels;
    j.plan = plan;
    j.sizes = sizes;
    j.leaf = leaf;
    j.arg = arg;
    post(&j);
    return j.rc;
  }

private:
  struct Job {
    std::function<void()> fn;
    int levels = 0;
    const int* plan = nullptr;
    const int* sizes = nullptr;
    void (*leaf)(void*) = nullptr;
    void* arg = nullptr;
    int rc = -1;
  };
  void post(Job* j) {
    std::unique_lock lock(mu_);
    job_ = j;
    pending_ = true;
    cv_.notify_all();
    if (j) cv_.wait(lock, [&] { return !pending_ && done_ == j; });
  }
  __attribute__((noinline)) Job* take() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return pending_; });
    return job_;
  }
  __attribute__((noinline)) void finish(Job* j) {
    std::unique_lock lock(mu_);
    pending_ = false;
    done_ = j;
    cv_.notify_all();
  }
  static void* thread_main(void* self) {
    auto* t = static_cast<ChainThread*>(self);
    for (;;) {
      Job* j = t->take();
      if (!j) return nullptr;
      if (j->fn) j->fn();
      else j->rc = wl_run(j->levels, j->plan, j->sizes, j->leaf, j->arg);
      t->finish(j);
    }
  }
  pthread_t thread_{};
  std::mutex mu_;
  std::condition_variable cv_;
  Job* job_ = nullptr;
  Job* done_ = nullptr;
  bool pending_ = false;
};

// How many of the reference's frames a walk found: its own first frame (a pc in its walking
// function, which no other walk shares) plus the longest run of the reference's frames from
// call_once's return address down.
size_t frames_found(const uint64_t* pcs, size_t n, const std::vector<uint64_t>& ref) {
  if (n == 0 || ref.size() < 2) return 0;
  for (size_t j = 0; j < n; ++j)
    if (pcs[j] == ref[1]) {
      size_t k = 0;
      while (j + k < n && 1 + k < ref.size() && pcs[j + k] == ref[1 + k]) ++k;
      return 1 + k;
    }
  return 1;
}

double median(std::vector<double> v) {
  if (v.empty()) return NAN;
  std::sort(v.begin(), v.end());
  size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

struct Result {
  std::string peer, regime;
  int target = 0;      // the depth asked for
  int depth = 0;       // frames of the reference walk
  int levels = 0;      // qsort levels
  size_t frames_min = SIZE_MAX, frames_max = 0; // frames returned
  size_t found_min = SIZE_MAX, found_max = 0;   // of them, frames of the reference
  std::vector<double> ns_per_frame;             // per batch (hot) or per sample (cold)
  double ns_total = 0;
  size_t frames_total = 0;
  size_t unwinds = 0;
  void returned(size_t n) {
    frames_min = std::min(frames_min, n);
    frames_max = std::max(frames_max, n);
  }
  void frames(size_t n, size_t found) {
    returned(n);
    found_min = std::min(found_min, found);
    found_max = std::max(found_max, found);
  }
};

class Bench {
public:
  Bench(Options o) : o_(std::move(o)) {}
  int run();

private:
  // The chain: levels of qsort, with the sizes that give the wanted depth.
  struct Plan {
    int levels = 0;
    std::vector<int> sizes;
  };
  Plan plan_for(int depth) const;
  bool build_chain(const Plan& plan, const std::vector<int>& funcs);
  __attribute__((noinline)) static void leaf(void* self);
  ChainThread chain_thread_;

  // The steps the leaf runs (a list so that run_step has one call site).
  std::vector<Step*> steps_;
  Step* add(Peer* p) {
    Step* s = new Step;
    s->peer = p;
    steps_.push_back(s);
    return s;
  }
  void clear_steps() {
    for (Step* s : steps_) delete s;
    steps_.clear();
  }
  // Called by the leaf after each step; may append steps (hot calibration).
  void after_step(size_t index);

  void hot(int depth);
  void cold(int depth, const std::vector<int>& pool, size_t& next);
  void write_json();

  Options o_;
  std::vector<Peer> peers_;
  Peer* ref_ = nullptr;
  std::vector<std::string> skipped_;
  std::vector<Result> results_;
  int base_frames_ = 0;
  double timer_overhead_ns_ = 0;
  // hot phase state
  bool hot_phase_ = false;
  std::vector<Step*> hot_calib_;
  std::string mark_; // syscall mode: the current block's marker
};

Bench::Plan Bench::plan_for(int depth) const {
  // A level whose qsort sorts 2^k ints adds 2 + k frames (the comparator, k msort_with_tmp,
  // qsort_r); prefer k = 2 (4 frames a level), k in 1..4.
  Plan p;
  int rest = depth - base_frames_;
  for (int l = std::max(1, rest / 4); l >= 1 && l <= WL_MAX_LEVELS; ) {
    int k_total = rest - 2 * l;
    if (k_total >= l && k_total <= 4 * l) {
      p.levels = l;
      for (int i = 0; i < l; ++i) {
        int k = k_total / l + (i < k_total % l ? 1 : 0);
        p.sizes.push_back(1 << k);
      }
      return p;
    }
    l += k_total > 4 * l ? 1 : -1;
  }
  return p;
}

bool Bench::build_chain(const Plan& plan, const std::vector<int>& funcs) {
  return chain_thread_.chain(plan.levels, funcs.data(), plan.sizes.data(), &Bench::leaf, this) == 0;
}

// The chain's leaf: runs the planned steps.
void Bench::leaf(void* self) {
  auto* b = static_cast<Bench*>(self);
  for (size_t i = 0; i < b->steps_.size(); ++i) {
    run_step(*b->steps_[i]);
    b->after_step(i);
  }
  asm volatile("" ::: "memory");
}

void Bench::after_step(size_t index) {
  if (!hot_phase_) return;
  // Hot: steps are [reference] [check per peer] [calibration per peer]; after the last
  // calibration, size the batches and append the interleaved rounds.
  size_t n = hot_calib_.size();
  if (index != 2 * n) return;
  std::vector<Step*> batches;
  for (Step* c : hot_calib_) {
    double per = c->ns / c->iters;
    int iters = o_.mode == Mode::Time ? std::max(1, int(o_.batch_us * 1000.0 / std::max(per, 1.0)))
                                      : o_.cg_hot_iters;
    Step proto;
    proto.peer = c->peer;
    proto.iters = iters;
    proto.record = false;
    if (o_.mode == Mode::Time) {
      proto.timed = true;
      for (int r = 0; r < o_.hot_rounds; ++r) batches.push_back(new Step(proto));
    } else {
      proto.collect = o_.mode == Mode::Callgrind;
      proto.mark = o_.mode == Mode::Syscalls ? mark_.c_str() : nullptr;
      batches.push_back(new Step(proto));
    }
  }
  // Interleave: round r of every peer, then round r + 1.
  size_t per_peer = batches.size() / std::max<size_t>(n, 1);
  for (size_t r = 0; r < per_peer; ++r)
    for (size_t p = 0; p < n; ++p) steps_.push_back(batches[p * per_peer + r]);
}

void Bench::hot(int depth) {
  Plan plan = plan_for(depth);
  if (!plan.levels) {
    std::fprintf(stderr, "depth %d: cannot plan a chain (base %d frames)\n", depth, base_frames_);
    return;
  }
  std::vector<int> funcs;
  for (int i = 0; i < plan.levels; ++i) funcs.push_back(i);
  clear_steps();
  add(ref_);
  std::vector<Peer*> measured;
  for (auto& p : peers_)
    if (o_.selected(p.name)) measured.push_back(&p);
  for (Peer* p : measured) add(p);
  hot_calib_.clear();
  for (Peer* p : measured) {
    Step* s = add(p);
    s->iters = o_.mode == Mode::Time ? 16 : 5; // warms caches; times the calibration
    s->record = false;
    s->timed = true;
    hot_calib_.push_back(s);
  }
  mark_ = "begin hot-" + std::to_string(depth);
  hot_phase_ = true;
  if (!build_chain(plan, funcs)) std::fprintf(stderr, "depth %d: chain failed\n", depth);
  hot_phase_ = false;
  Step* ref = steps_[0];
  std::vector<uint64_t> refv(ref->pcs, ref->pcs + ref->frames);
  size_t n = measured.size();
  for (size_t i = 0; i < n; ++i) {
    Result r;
    r.peer = measured[i]->name;
    r.regime = "hot";
    r.target = depth;
    r.depth = int(refv.size());
    r.levels = plan.levels;
    Step* check = steps_[1 + i];
    r.frames(check->frames, frames_found(check->pcs, check->frames, refv));
    for (size_t j = 1 + 2 * n; j < steps_.size(); ++j) {
      Step* b = steps_[j];
      if (b->peer != measured[i]) continue;
      r.returned(b->frames); // batches do not record pcs
      r.unwinds += size_t(b->iters);
      r.frames_total += size_t(b->iters) * b->frames;
      r.ns_total += b->ns;
      if (b->frames) r.ns_per_frame.push_back(b->ns / b->iters / double(b->frames));
    }
    results_.push_back(r);
  }
  if (o_.show_frames) {
    auto where = [](uint64_t pc) {
      Dl_info info{};
      std::string s = "?";
      if (dladdr(reinterpret_cast<void*>(pc - 1), &info) && info.dli_fname) {
        s = info.dli_fname;
        s = s.substr(s.rfind('/') + 1);
        if (info.dli_sname)
          s += std::string(" ") + info.dli_sname + "+" +
               std::to_string(pc - reinterpret_cast<uint64_t>(info.dli_saddr));
        else
          s += "+" + std::to_string(pc - reinterpret_cast<uint64_t>(info.dli_fbase));
      }
      return s;
    };
    for (size_t i = 0; i <= n; ++i) {
      Step* c = steps_[i];
      std::fprintf(stderr, "depth %d, %s%s:\n", depth, c->peer->name.c_str(), i ? "" : " (reference)");
      for (size_t k = 0; k < c->frames; ++k)
        std::fprintf(stderr, "  #%zu %#lx %s\n", k, (unsigned long)c->pcs[k], where(c->pcs[k]).c_str());
    }
  }
  if (int(refv.size()) != depth)
    std::fprintf(stderr, "note: depth %d chain has %zu frames\n", depth, refv.size());
  if (o_.mode == Mode::Callgrind) {
    std::string label = "hot-" + std::to_string(depth);
    CALLGRIND_DUMP_STATS_AT(label.c_str());
  }
  clear_steps();
}

void Bench::cold(int depth, const std::vector<int>& pool, size_t& next) {
  Plan plan = plan_for(depth);
  if (!plan.levels) return;
  std::vector<Peer*> measured;
  for (auto& p : peers_)
    if (o_.selected(p.name)) measured.push_back(&p);
  size_t n = measured.size();
  std::vector<Result> res(n);
  for (size_t i = 0; i < n; ++i) {
    res[i].peer = measured[i]->name;
    res[i].regime = "cold";
    res[i].levels = plan.levels;
    res[i].target = depth;
  }
  int samples = o_.mode == Mode::Time ? o_.cold_samples : o_.cg_cold_samples;
  mark_ = "begin cold-" + std::to_string(depth);
  int done = 0;
  for (int s = 0; s < samples; ++s) {
    if (next + size_t(plan.levels) > pool.size()) break;
    std::vector<int> funcs(pool.begin() + long(next), pool.begin() + long(next + plan.levels));
    next += size_t(plan.levels);
    clear_steps();
    add(ref_);
    // Per peer, in an order rotating with the sample: the measured cold unwind, then (flushed
    // again) a recorded one for the frames-found check.
    std::vector<std::pair<size_t, Step*>> measured_steps, check_steps;
    for (size_t k = 0; k < n; ++k) {
      size_t i = (k + size_t(s)) % n;
      Step* m = add(measured[i]);
      m->flush = true;
      m->record = false;
      m->timed = o_.mode == Mode::Time;
      m->collect = o_.mode == Mode::Callgrind;
      m->mark = o_.mode == Mode::Syscalls ? mark_.c_str() : nullptr;
      Step* c = add(measured[i]);
      c->flush = true;
      measured_steps.push_back({i, m});
      check_steps.push_back({i, c});
    }
    if (!build_chain(plan, funcs)) {
      std::fprintf(stderr, "depth %d: chain failed\n", depth);
      break;
    }
    ++done;
    std::vector<uint64_t> refv(steps_[0]->pcs, steps_[0]->pcs + steps_[0]->frames);
    for (size_t k = 0; k < n; ++k) {
      auto [i, m] = measured_steps[k];
      Step* c = check_steps[k].second;
      Result& r = res[i];
      r.depth = int(refv.size());
      r.frames(m->frames, frames_found(c->pcs, c->frames, refv));
      r.unwinds += 1;
      r.frames_total += m->frames;
      double ns = std::max(0.0, m->ns - timer_overhead_ns_);
      r.ns_total += ns;
      if (m->frames) r.ns_per_frame.push_back(ns / double(m->frames));
    }
  }
  clear_steps();
  if (done < samples && o_.mode == Mode::Time)
    std::fprintf(stderr, "depth %d cold: %d samples (comparator pool exhausted)\n", depth, done);
  for (auto& r : res) results_.push_back(r);
  if (o_.mode == Mode::Callgrind) {
    std::string label = "cold-" + std::to_string(depth);
    CALLGRIND_DUMP_STATS_AT(label.c_str());
  }
}

int Bench::run() {
  add_gcc_peers(peers_);
  add_fp_peers(peers_);
#ifdef BENCH_EHELF
  add_ehelf_peers(peers_);
#endif
#ifdef BENCH_LIBUNWIND
  add_libunwind_peers(peers_);
#endif
#ifdef BENCH_DWFL
  add_dwfl_peers(peers_);
#endif
#ifdef BENCH_LLVM
  add_llvm_peers(peers_);
#endif
#ifdef BENCH_EHELF_CAPI
  add_capi_peers(peers_);
#endif
  if (o_.list) {
    for (auto& p : peers_) std::printf("%s\n", p.name.c_str());
    return 0;
  }
  // Init the reference, then the peers (only the selected one in the single-peer modes).
  for (auto& p : peers_)
    if (p.name == kReferencePeer) ref_ = &p;
  auto init_on_chain_thread = [&](Peer& p) {
    std::string err;
    chain_thread_.call([&] { err = p.init(); });
    return err;
  };
  if (!ref_ || !init_on_chain_thread(*ref_).empty()) {
    std::fprintf(stderr, "no reference walk (libgcc)\n");
    return 1;
  }
  std::vector<Peer> kept;
  for (auto& p : peers_) {
    if (!o_.selected(p.name) && p.name != kReferencePeer) continue;
    std::string err = init_on_chain_thread(p);
    if (!err.empty()) {
      skipped_.push_back(p.name + ": " + err);
      std::fprintf(stderr, "skipping %s: %s\n", p.name.c_str(), err.c_str());
      continue;
    }
    kept.push_back(p);
  }
  peers_ = kept;
  for (auto& p : peers_)
    if (p.name == kReferencePeer) ref_ = &p;
  if (!o_.only.empty() && std::none_of(peers_.begin(), peers_.end(),
                                       [&](const Peer& p) { return o_.selected(p.name); })) {
    std::fprintf(stderr, "no peer in '%s' (or all were skipped)\n", o_.only.c_str());
    return 1;
  }

  // Timer overhead (subtracted from cold single-unwind timings).
  std::vector<double> ov;
  for (int i = 0; i < 1001; ++i) {
    auto t0 = Clock::now();
    ov.push_back(std::chrono::duration<double, std::nano>(Clock::now() - t0).count());
  }
  timer_overhead_ns_ = median(ov);

  // Frames outside the qsort levels (the walk's own, call_once, the leaf, wl_run, thread_main,
  // start_thread, clone3): a one-level chain of size 2 has base + 3.
  {
    clear_steps();
    add(ref_);
    Plan p;
    p.levels = 1;
    p.sizes = {2};
    if (!build_chain(p, {0})) return 1;
    base_frames_ = int(steps_[0]->frames) - 3;
    clear_steps();
  }

  if (o_.hot)
    for (int d : o_.depths) hot(d);

  // Cold pools: comparators from 64 on, shared out between depths by their level counts.
  std::vector<int> levels;
  int total_levels = 0;
  for (int d : o_.depths) {
    levels.push_back(plan_for(d).levels);
    total_levels += levels.back();
  }
  int first = 64;
  for (size_t i = 0; i < o_.depths.size(); ++i) {
    int share = total_levels ? (wl_count - first) * levels[i] / total_levels : 0;
    std::vector<int> pool;
    int start = first;
    for (size_t j = 0; j < i; ++j) start += total_levels ? (wl_count - first) * levels[j] / total_levels : 0;
    for (int f = start; f < start + share; ++f) pool.push_back(f);
    size_t next = 0;
    if (o_.cold) cold(o_.depths[i], pool, next);
  }
  write_json();
  return 0;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

void Bench::write_json() {
  FILE* f = o_.json.empty() ? stdout : std::fopen(o_.json.c_str(), "w");
  if (!f) {
    std::perror(o_.json.c_str());
    return;
  }
  struct utsname u {};
  uname(&u);
  std::fprintf(f, "{\n  \"mode\": \"%s\",\n",
               o_.mode == Mode::Time ? "time" : o_.mode == Mode::Callgrind ? "callgrind" : "syscalls");
  std::fprintf(f, "  \"kernel\": \"%s %s\",\n", u.sysname, u.release);
  std::fprintf(f, "  \"timer_overhead_ns\": %.1f,\n  \"base_frames\": %d,\n  \"comparators\": %d,\n",
               timer_overhead_ns_, base_frames_, wl_count);
  std::fprintf(f, "  \"peers\": [\n");
  for (size_t i = 0; i < peers_.size(); ++i)
    std::fprintf(f, "    {\"name\": \"%s\", \"cold_means\": \"%s\"}%s\n",
                 json_escape(peers_[i].name).c_str(), json_escape(peers_[i].cold_means).c_str(),
                 i + 1 < peers_.size() ? "," : "");
  std::fprintf(f, "  ],\n  \"skipped\": [");
  for (size_t i = 0; i < skipped_.size(); ++i)
    std::fprintf(f, "%s\"%s\"", i ? ", " : "", json_escape(skipped_[i]).c_str());
  std::fprintf(f, "],\n  \"results\": [\n");
  for (size_t i = 0; i < results_.size(); ++i) {
    const Result& r = results_[i];
    double med = median(r.ns_per_frame);
    double best = r.ns_per_frame.empty() ? NAN
                                         : *std::min_element(r.ns_per_frame.begin(), r.ns_per_frame.end());
    double mean = r.frames_total ? r.ns_total / double(r.frames_total) : NAN;
    auto num = [](double v) { return std::isnan(v) ? std::string("null") : std::to_string(v); };
    std::fprintf(f,
                 "    {\"peer\": \"%s\", \"regime\": \"%s\", \"target_depth\": %d, \"depth\": %d, "
                 "\"levels\": %d, \"frames_min\": %zu, \"frames_max\": %zu, \"found_min\": %zu, "
                 "\"found_max\": %zu, \"unwinds\": %zu, \"frames_total\": %zu, "
                 "\"ns_per_frame_median\": %s, \"ns_per_frame_best\": %s, \"ns_per_frame_mean\": %s, "
                 "\"measurements\": %zu}%s\n",
                 json_escape(r.peer).c_str(), r.regime.c_str(), r.target, r.depth, r.levels,
                 r.frames_min == SIZE_MAX ? 0 : r.frames_min, r.frames_max,
                 r.found_min == SIZE_MAX ? 0 : r.found_min, r.found_max, r.unwinds, r.frames_total,
                 num(med).c_str(), num(best).c_str(), num(mean).c_str(), r.ns_per_frame.size(),
                 i + 1 < results_.size() ? "," : "");
  }
  std::fprintf(f, "  ]\n}\n");
  if (f != stdout) std::fclose(f);
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  for (const char* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p) ++p;
  }
  return v;
}

} // namespace
} // namespace bench

int main(int argc, char** argv) {
  bench::Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--callgrind") o.mode = bench::Mode::Callgrind;
    else if (a == "--syscalls") o.mode = bench::Mode::Syscalls;
    else if (a == "--list") o.list = true;
    else if (a == "--show-frames") o.show_frames = true;
    else if (a == "--no-hot") o.hot = false;
    else if (a == "--no-cold") o.cold = false;
    else if (a == "--only") o.only = val();
    else if (a == "--json") o.json = val();
    else if (a == "--depths") o.depths = bench::parse_list(val());
    else if (a == "--cold-samples") o.cold_samples = std::atoi(val());
    else if (a == "--hot-rounds") o.hot_rounds = std::atoi(val());
    else if (a == "--batch-us") o.batch_us = std::atoi(val());
    else if (a == "--cg-hot-iters") o.cg_hot_iters = std::atoi(val());
    else if (a == "--cg-cold-samples") o.cg_cold_samples = std::atoi(val());
    else {
      std::fprintf(stderr,
                   "usage: %s [--json FILE] [--depths 10,30,100] [--cold-samples N] "
                   "[--hot-rounds N] [--batch-us N] [--no-hot] [--no-cold] [--list] [--only PEER] [--callgrind "
                   "[--cg-hot-iters N] [--cg-cold-samples N]] [--syscalls]\n",
                   argv[0]);
      return 2;
    }
  }
  if (o.mode != bench::Mode::Time && o.only.empty() && !o.list) {
    std::fprintf(stderr, "--callgrind and --syscalls need --only PEER\n");
    return 2;
  }
  return bench::Bench(o).run();
}
