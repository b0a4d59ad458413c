#include "synth/exception_tables.hpp"

#include <elf.h>

#include <algorithm>
#include <array>
#include <optional>
#include <unordered_map>

#include "dwarf/constants.hpp"
#include "elf/dynamic_relocations.hpp"
#include "support/byte_cursor.hpp"
#include "x86/abi.hpp"
#include "x86/decoder.hpp"
#include "x86/elf_code.hpp"

namespace ehelf::synth {

namespace {

// A call-site table value in the encodings compilers use there (uleb128, udata4).
std::optional<uint64_t> call_site_value(ByteCursor& c, uint8_t encoding) {
  if (encoding == dw::EH_PE_uleb128) return c.uleb();
  if (encoding == dw::EH_PE_udata4) return c.u32();
  return std::nullopt;
}

} // namespace

// One LSDA at `pos` of .gcc_except_table, and where it ends: after its call-site table, its
// action records, its type table and the exception specifications (`throw(...)` lists: uleb128
// type indices ending with 0, at TType base - filter - 1 for a negative filter), whichever is
// last. Nothing for a form compilers do not emit (an LPStart, another call-site encoding).
std::optional<std::pair<ExceptionTables::Lsda, size_t>>
ExceptionTables::parse_one(std::span<const uint8_t> data, size_t pos, uint64_t addr) {
  constexpr int kMaxChain = 1024;    // action records followed in one chain (they can loop)
  constexpr int kMaxSteps = 1 << 16; // in all the LSDA's chains (a crafted one has many)
  int steps = 0;
  ByteCursor c(data);
  c.seek(pos);
  Lsda l{addr + pos, {}};
  if (c.u8() != dw::EH_PE_omit) return std::nullopt; // LPStart present: not what compilers emit
  size_t end = 0, ttype_base = 0;
  const uint8_t ttype = c.u8();
  if (ttype != dw::EH_PE_omit) {
    const uint64_t off = c.uleb();
    if (!c.ok() || off > data.size() - c.pos()) return std::nullopt;
    ttype_base = end = c.pos() + off;
  }
  const uint8_t cs_encoding = c.u8();
  const uint64_t cs_length = c.uleb();
  if (!c.ok() || cs_length > c.remaining()) return std::nullopt;
  const size_t cs_end = c.pos() + cs_length;
  std::vector<uint64_t> actions;
  while (c.ok() && c.pos() < cs_end) {
    auto start = call_site_value(c, cs_encoding);
    auto length = call_site_value(c, cs_encoding);
    auto pad = call_site_value(c, cs_encoding);
    if (!start || !length || !pad) return std::nullopt;
    if (const uint64_t action = c.uleb(); action) actions.push_back(action);
    l.sites.push_back({*start, *length, *pad});
  }
  if (!c.ok()) return std::nullopt;
  // Action records (filter, next: two slebs) from cs_end, each chain followed from its call
  // site's record.
  end = std::max(end, cs_end);
  std::sort(actions.begin(), actions.end());
  actions.erase(std::unique(actions.begin(), actions.end()), actions.end());
  for (uint64_t first : actions) {
    ByteCursor a(data);
    size_t at = cs_end + first - 1;
    for (int i = 0; i < kMaxChain && steps < kMaxSteps && at < data.size(); ++i, ++steps) {
      a.seek(at);
      const int64_t filter = a.sleb();
      const size_t next_field = a.pos();
      const int64_t next = a.sleb();
      if (!a.ok()) break;
      end = std::max(end, a.pos());
      if (filter < 0 && ttype_base && uint64_t(-(filter + 1)) < data.size() - ttype_base) {
        ByteCursor spec(data);
        spec.seek(ttype_base + uint64_t(-(filter + 1)));
        while (spec.ok() && spec.uleb() != 0) {
        }
        if (spec.ok()) end = std::max(end, spec.pos());
      }
      if (!next) break;
      at = size_t(int64_t(next_field) + next);
    }
  }
  return std::pair{std::move(l), end};
}

// The LSDAs of .gcc_except_table, in order, padding zeros between them; the scan stops at the
// first form parse_one does not know.
std::vector<ExceptionTables::Lsda> ExceptionTables::parse(std::span<const uint8_t> data,
                                                          uint64_t addr) {
  std::vector<Lsda> out;
  for (size_t pos = 0; pos < data.size();) {
    while (pos < data.size() && data[pos] == 0)
      ++pos;
    if (pos >= data.size()) break;
    auto one = parse_one(data, pos, addr);
    if (!one || one->second <= pos) break;
    out.push_back(std::move(one->first));
    pos = one->second;
  }
  return out;
}

namespace {

// The analysed instruction holding `a`, or null.
const AnalysedInstruction* covering(const SynthResult& r, uint64_t a) {
  auto it =
      std::upper_bound(r.instructions.begin(), r.instructions.end(), a,
                       [](uint64_t v, const AnalysedInstruction& in) { return v < in.address; });
  if (it == r.instructions.begin()) return nullptr;
  --it;
  return a < it->address + it->length ? &*it : nullptr;
}

// The analysed instruction of `fn` ending exactly at `a`, or null.
const AnalysedInstruction* ending_at(const SynthResult& r, uint64_t a, uint32_t fn) {
  const AnalysedInstruction* in = a ? covering(r, a - 1) : nullptr;
  return in && in->address + in->length == a && in->function == fn ? in : nullptr;
}

} // namespace

ExceptionTables::ExceptionTables(const ElfFile& elf, const UnwindTable* shipped)
    : elf_(elf), shipped_(shipped && shipped->function_count() ? shipped : nullptr) {
  if (const Section* table = elf.find_section(".gcc_except_table"))
    if (auto data = elf.section_data(*table)) {
      lsdas_ = parse(*data, table->addr);
      // With FDEs, each LSDA is where its FDE says, found by the scan or not.
      if (shipped_) {
        std::set<uint64_t> known;
        for (const Lsda& l : lsdas_)
          known.insert(l.address);
        for (size_t i = 0; i < shipped_->function_count(); ++i)
          if (const uint64_t at = shipped_->function(i).lsda;
              at >= table->addr && at - table->addr < data->size() && known.insert(at).second)
            if (auto one = parse_one(*data, at - table->addr, table->addr))
              lsdas_.push_back(std::move(one->first));
        std::sort(lsdas_.begin(), lsdas_.end(),
                  [](const Lsda& x, const Lsda& y) { return x.address < y.address; });
      }
    }
  if (shipped_) {
    for (size_t i = 0; i < shipped_->function_count() && !personality_slot_ && !personality_; ++i)
      if (shipped_->function(i).lsda) {
        personality_slot_ = shipped_->function(i).personality_slot;
        personality_ = shipped_->function(i).personality;
      }
    return;
  }
  // The slot: DW.ref's word (R_X86_64_64), else the GOT's, else (non-PIE executables, whose
  // FDEs name the PLT entry) the PLT's GOT slot, which the loader binds to the same routine.
  int best = 0;
  for (const NamedRelocation& r : dynamic_relocations(elf)) {
    const int rank = r.type == R_X86_64_64          ? 3
                     : r.type == R_X86_64_GLOB_DAT  ? 2
                     : r.type == R_X86_64_JUMP_SLOT ? 1
                                                    : 0;
    if ((r.name == "__gxx_personality_v0" || r.name == "__gcc_personality_v0") && rank > best) {
      best = rank;
      personality_slot_ = r.offset;
    }
  }
  if (!personality_slot_)
    for (const Symbol& s : elf.symbols())
      if (s.name == "__gxx_personality_v0" || s.name == "__gcc_personality_v0")
        personality_ = s.value;
  if (!personality_slot_ && !personality_) lsdas_.clear(); // nothing could use them
}

const ExceptionTables::Lsda* ExceptionTables::lsda_at(uint64_t address) const {
  auto it = std::lower_bound(lsdas_.begin(), lsdas_.end(), address,
                             [](const Lsda& l, uint64_t v) { return l.address < v; });
  return it != lsdas_.end() && it->address == address ? &*it : nullptr;
}

// The LSDA's offsets, from the part's start (LPStart omitted), end on instruction boundaries of
// the function (or in code not analysed yet), on calls where they have a landing pad, and its
// landing pads lie in the part on no other instruction than their own (pads are reached by no jump,
// so usually by no analysis yet).
bool ExceptionTables::fits(const SynthResult& r, const Lsda& l, uint32_t fn,
                           const SynthFunction::Part& p) const {
  bool first_pad = true;
  for (const CallSite& cs : l.sites) {
    if (cs.start + cs.length > p.end - p.begin || cs.landing_pad >= p.end - p.begin) return false;
    if (cs.landing_pad) {
      // No jump reaches a landing pad: code an analysis reached is none.
      if (covering(r, p.begin + cs.landing_pad)) return false;
    }
    // Code reached only from another landing pad is not analysed yet: such a region passes.
    const uint64_t end = p.begin + cs.start + cs.length;
    const AnalysedInstruction* last = ending_at(r, end, fn);
    // The first call with a landing pad is in the code the function's analysis reached (its
    // body comes before its pads): an LSDA does not fit code past the function's end.
    if (cs.landing_pad && first_pad && !last) return false;
    if (cs.landing_pad) first_pad = false;
    if (!last) {
      if (covering(r, end - 1)) return false;
      continue;
    }
    if (!cs.landing_pad) continue; // a region without handler (clang: the gaps between calls)
    if (!is_call(last->address)) return false;
  }
  return true;
}

// The part's code decoded from its start, one instruction after the other (compilers put no data
// between a function's instructions), as far as an LSDA reaches or the first undecodable byte.
// Decodes `code` (at `address`) one instruction after the other while the offset is at most
// `limit`, into `sw`'s instruction starts and call ends; returns the offset it stopped at.
uint64_t ExceptionTables::linear_sweep(std::span<const uint8_t> code, uint64_t address,
                                       uint64_t limit, Sweep& sw) const {
  return decoder_.sweep(code, address, [&](const x86::Instruction& in, uint64_t off) {
    if (off > limit) return false;
    sw.starts.push_back(uint32_t(off));
    if (in.flow == x86::Flow::call || in.flow == x86::Flow::call_indirect)
      sw.call_ends.push_back(uint32_t(off + in.length));
    return true;
  });
}

const ExceptionTables::Sweep& ExceptionTables::sweep(const SynthFunction::Part& p) {
  // No LSDA reaches further into its part than max_extent_ (a few KiB in real files).
  const uint64_t max_sweep = std::min<uint64_t>(1 << 20, max_extent_);
  auto [it, fresh] = sweeps_.try_emplace(p.begin);
  Sweep& sw = it->second;
  // Ends only move closer as starts are found: a sweep to a further end serves.
  if (!fresh && sw.span >= std::min(p.end - p.begin, max_sweep)) return sw;
  sw = {};
  sw.span = std::min(p.end - p.begin, max_sweep);
  // The whole part's bytes for the decoder; the sweep ends past max_sweep (an instruction
  // starting just below it is decoded whole).
  auto code = x86::code_from(elf_, p.begin);
  code = code.first(std::min<uint64_t>(p.end - p.begin, code.size()));
  if (!code.empty() && linear_sweep(code, p.begin, max_sweep, sw) == code.size())
    sw.starts.push_back(uint32_t(code.size())); // the part's end is a boundary
  return sw;
}

// Every region of the LSDA starts and ends on an instruction boundary of the part's code, the
// regions with a landing pad end right after a call, and each pad is an instruction's start.
// `head`: the code before the part (up to the part's start, which its last instruction reaches
// exactly), the LSDA's offsets counting from `head_base` in it.
bool ExceptionTables::fits_code(const Lsda& l, const Sweep& sw, const Sweep* head,
                                uint32_t head_base) {
  const uint64_t shift = head ? head->starts.back() - head_base : 0;
  auto in = [&](const std::vector<uint32_t>& head_list, const std::vector<uint32_t>& list,
                uint64_t off) {
    if (off < shift) return std::binary_search(head_list.begin(), head_list.end(), off + head_base);
    return std::binary_search(list.begin(), list.end(), off - shift);
  };
  static const std::vector<uint32_t> none;
  auto boundary = [&](uint64_t off) { return in(head ? head->starts : none, sw.starts, off); };
  auto call_end = [&](uint64_t off) {
    // A call ending exactly at the part's start belongs to the head.
    if (head && off == shift)
      return std::binary_search(head->call_ends.begin(), head->call_ends.end(), off + head_base);
    return in(head ? head->call_ends : none, sw.call_ends, off);
  };
  for (const CallSite& cs : l.sites) {
    const uint64_t end = cs.start + cs.length;
    if (!boundary(cs.start) || !boundary(end)) return false;
    if (cs.landing_pad && (!boundary(cs.landing_pad) || !call_end(end))) return false;
  }
  return true;
}

// The code from `begin` up to `part_begin`, decoded one instruction after the other; empty
// unless an instruction ends exactly at part_begin (starts hold that end last).
ExceptionTables::Sweep ExceptionTables::head_sweep(uint64_t begin, uint64_t part_begin) const {
  Sweep h;
  auto code = x86::code_from(elf_, begin);
  if (part_begin <= begin || code.size() < part_begin - begin) return {};
  code = code.first(part_begin - begin);
  if (linear_sweep(code, begin, UINT64_MAX, h) != code.size()) return {};
  h.starts.push_back(uint32_t(code.size()));
  return h;
}

std::span<const uint8_t> ExceptionTables::code_at(uint64_t address, uint64_t size) const {
  auto code = x86::code_from(elf_, address);
  return code.first(std::min<uint64_t>(size, code.size()));
}

size_t ExceptionTables::pad_sites(const Lsda& l) {
  return std::count_if(l.sites.begin(), l.sites.end(),
                       [](const CallSite& cs) { return cs.landing_pad != 0; });
}

// A landing pad at a part's very start would have offset 0, which the call-site table reads as
// "no landing pad": gcc then puts a one-byte `nop` first and the pad at offset 1. A `nop` at
// `begin` and a pad at offset 1 mark where the LSDA's part starts, before the first address any
// jump reaches (the pad's code is reached only through the exception tables).
bool ExceptionTables::nop_before_first_pad(const Lsda& l, uint64_t begin) const {
  constexpr uint8_t kNop = 0x90;
  auto b = code_at(begin, 1);
  return b.size() == 1 && b[0] == kNop &&
         std::any_of(l.sites.begin(), l.sites.end(),
                     [](const CallSite& cs) { return cs.landing_pad == 1; });
}

bool ExceptionTables::is_call(uint64_t address) const {
  auto code = x86::code_from(elf_, address);
  if (code.empty()) return false;
  auto in = decoder_.decode(code, address);
  return in && (in->flow == x86::Flow::call || in->flow == x86::Flow::call_indirect);
}

std::vector<LandingPad> ExceptionTables::match(SynthResult& result) {
  if (shipped_) {
    assign_shipped(result);
  } else {
    index_by_first_pad_end();
    assign_fitting(result, fitting_parts(result));
  }
  return landing_pads(result);
}

void ExceptionTables::assign_shipped(SynthResult& result) {
  std::unordered_map<uint64_t, uint64_t> lsda_of; // FDE start -> LSDA
  for (size_t i = 0; i < shipped_->function_count(); ++i)
    if (const FunctionInfo& f = shipped_->function(i); f.lsda) lsda_of[f.pc_begin] = f.lsda;
  for (SynthFunction& s : result.functions)
    for (SynthFunction::Part& p : s.parts)
      if (auto it = lsda_of.find(p.begin); it != lsda_of.end() && !p.lsda) {
        p.lsda = it->second;
        assigned_.insert(it->second);
      }
}

void ExceptionTables::index_by_first_pad_end() {
  if (by_first_pad_end_built_) return;
  by_first_pad_end_built_ = true;
  for (uint32_t i = 0; i < lsdas_.size(); ++i) {
    const Lsda& l = lsdas_[i];
    // An LSDA without landing pads (a noexcept function's: calls reaching it terminate) fits too
    // many functions to be matched; left out, an exception unwinds through.
    auto pad = std::find_if(l.sites.begin(), l.sites.end(),
                            [](const CallSite& cs) { return cs.landing_pad != 0; });
    if (pad == l.sites.end()) continue;
    by_first_pad_end_[pad->start + pad->length].push_back(i);
    for (const CallSite& cs : l.sites)
      max_extent_ = std::max({max_extent_, cs.start + cs.length, cs.landing_pad + 1});
  }
}

std::map<uint32_t, std::vector<ExceptionTables::Candidate>>
ExceptionTables::fitting_parts(SynthResult& result) {
  // Code built for CET (-fcf-protection: most functions start with endbr64) starts every
  // landing pad with endbr64 too, which rules out most places an LSDA fits by chance.
  size_t starts = 0, marked = 0;
  for (const SynthFunction& f : result.functions)
    if (auto b = code_at(f.begin, 4); b.size() == 4) {
      ++starts;
      marked += x86::starts_with_endbr64(b);
    }
  const bool pads_marked = starts >= 10 && marked * 2 >= starts;
  auto pads_start_marked = [&](const Lsda& l, uint64_t begin) {
    for (const CallSite& cs : l.sites)
      if (cs.landing_pad) {
        auto b = code_at(begin + cs.landing_pad, 4);
        if (!x86::starts_with_endbr64(b)) return false;
      }
    return true;
  };
  // Every free part each LSDA fits, found from the calls in the parts' code. A part found by a
  // jump starts at the first address jumped to, maybe past its real start (the code before is
  // reached from its landing pads): an LSDA may then fit from a start up to kMaxHead bytes
  // earlier, in code no analysis reached.
  constexpr uint64_t kMaxHead = 64, kMaxGap = 4096;
  std::map<uint32_t, std::vector<Candidate>> fitting; // by LSDA index
  size_t candidates_found = 0;
  for (uint32_t fn = 0; fn < result.functions.size(); ++fn)
    for (SynthFunction::Part& p : result.functions[fn].parts) {
      if (p.lsda) continue;
      // A part no LSDA fitted stays so while its function's analysis and extent stay (other
      // analyses and matches only rule fits out).
      const uint64_t signature = (uint64_t(fn) << 40) ^ (result.functions[fn].instructions << 8) ^
                                 (p.end - p.begin) ^ (uint64_t(p.by_jump) << 63);
      if (auto b = barren_.find(p.begin); b != barren_.end() && b->second == signature) continue;
      const size_t candidates_before = candidates_found;
      // The code between the last analysed instruction before a part found by a jump and the
      // part, when it decodes right up to the part.
      Sweep gap;
      if (p.by_jump) {
        auto it = std::lower_bound(
            result.instructions.begin(), result.instructions.end(), p.begin,
            [](const AnalysedInstruction& in, uint64_t v) { return in.address < v; });
        if (it != result.instructions.begin()) {
          const uint64_t reached = std::prev(it)->address + std::prev(it)->length;
          if (reached < p.begin && p.begin - reached <= kMaxGap) gap = head_sweep(reached, p.begin);
        }
      }
      const uint64_t gap_size = gap.starts.empty() ? 0 : gap.starts.back();
      const uint64_t head = std::min(kMaxHead, gap_size);
      const Sweep& sw = sweep(p);
      for (uint32_t e : sw.call_ends)
        for (auto it = by_first_pad_end_.lower_bound(e);
             it != by_first_pad_end_.end() && it->first <= e + head; ++it) {
          const uint64_t back = it->first - e; // the LSDA's start this far before the part's
          const uint32_t head_base = uint32_t(gap_size - back);
          if (back && !std::binary_search(gap.starts.begin(), gap.starts.end(), head_base))
            continue;
          for (uint32_t i : it->second) {
            const Lsda& l = lsdas_[i];
            SynthFunction::Part from = p;
            from.begin = p.begin - back;
            // From an earlier start, only an LSDA with several landing pads (a single call's
            // shape fits too many places), or one whose part opens with the compiler's mark.
            if (back && pad_sites(l) < 2 && !nop_before_first_pad(l, from.begin)) continue;
            if (fits_code(l, sw, back ? &gap : nullptr, head_base) &&
                (!pads_marked || pads_start_marked(l, from.begin)) && fits(result, l, fn, from)) {
              fitting[i].push_back({fn, &p, from.begin});
              ++candidates_found;
            }
          }
        }
      if (candidates_found == candidates_before) barren_[p.begin] = signature;
    }
  return fitting;
}

void ExceptionTables::assign_fitting(SynthResult& result,
                                     std::map<uint32_t, std::vector<Candidate>> fitting) {
  std::vector<std::pair<const Lsda*, std::vector<Candidate>>> open;
  for (auto& [i, parts] : fitting)
    open.emplace_back(&lsdas_[i], std::move(parts));
  // An LSDA fitting one free part gets it. Several parts of the same shape (template instances,
  // char and wchar_t twins) are told apart by order: compilers and linkers lay out LSDAs in the
  // order of their functions, first parts and split-off parts each in ascending address order,
  // so a part must lie between those of the nearest matched LSDAs before and after it of its
  // kind.
  auto kind = [&](const Candidate& c) {
    return c.part == &result.functions[c.fn].parts.front() ? 0 : 1;
  };
  auto in_order = [&](uint64_t lsda, int k, uint64_t part) {
    const auto& anchors = anchors_[k];
    auto after = anchors.upper_bound(lsda);
    if (after != anchors.end() && after->second <= part) return false;
    return after == anchors.begin() || std::prev(after)->second < part;
  };
  // Two LSDAs claiming the same part (one of them belongs to a part not found, or to a twin)
  // get neither.
  for (bool progress = true; progress;) {
    progress = false;
    std::map<SynthFunction::Part*, int> claims;
    std::vector<std::pair<const Lsda*, Candidate>> proposals;
    for (auto& [l, candidates] : open) {
      if (assigned_.count(l->address)) continue;
      std::erase_if(candidates, [](const Candidate& c) { return c.part->lsda != 0; });
      std::vector<Candidate> ordered;
      for (const Candidate& c : candidates)
        if (in_order(l->address, kind(c), c.begin)) ordered.push_back(c);
      // A single fitting part is enough for an LSDA with several landing pads; one with a
      // single pad (a shape many functions have) must also be in order.
      const bool specific = pad_sites(*l) >= 2;
      const std::vector<Candidate>& choice =
          candidates.size() == 1 && specific ? candidates : ordered;
      if (choice.size() != 1) continue;
      proposals.emplace_back(l, choice.front());
      ++claims[choice.front().part];
    }
    for (const auto& [l, c] : proposals) {
      if (claims[c.part] != 1) continue;
      c.part->begin = c.begin; // a split-off part's real start, when found before its jumps
      c.part->lsda = l->address;
      assigned_.insert(l->address);
      anchors_[kind(c)][l->address] = c.begin;
      // Out of the index: the parts' calls no longer look it up.
      for (const CallSite& cs : l->sites)
        if (cs.landing_pad) {
          if (auto b = by_first_pad_end_.find(cs.start + cs.length); b != by_first_pad_end_.end())
            std::erase(b->second, uint32_t(l - lsdas_.data()));
          break;
        }
      progress = true;
    }
  }
}

std::vector<LandingPad> ExceptionTables::landing_pads(const SynthResult& result) const {
  std::vector<LandingPad> pads;
  for (uint32_t fn = 0; fn < result.functions.size(); ++fn)
    for (const SynthFunction::Part& p : result.functions[fn].parts)
      if (const Lsda* l = p.lsda ? lsda_at(p.lsda) : nullptr)
        for (const CallSite& cs : l->sites)
          if (cs.landing_pad)
            if (const AnalysedInstruction* call =
                    ending_at(result, p.begin + cs.start + cs.length, fn))
              pads.push_back({fn, p.begin + cs.landing_pad, call->address});
  return pads;
}

} // namespace ehelf::synth
