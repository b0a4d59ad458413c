#include "synth/exception_tables.hpp"

#include <elf.h>

#include <algorithm>
#include <optional>
#include <unordered_map>

#include "support/byte_cursor.hpp"
#include "synth/dynamic_relocations.hpp"
#include "x86/decoder.hpp"

namespace ehelf::synth {

namespace {

constexpr uint8_t kOmit = 0xff;

// A call-site table value in the encodings compilers use there (uleb128, udata4).
std::optional<uint64_t> call_site_value(ByteCursor& c, uint8_t encoding) {
  if (encoding == 0x01) return c.uleb();
  if (encoding == 0x03) return c.u32();
  return std::nullopt;
}

} // namespace

// One LSDA at `pos` of .gcc_except_table, and where it ends: after its call-site table, its
// action records, its type table and the exception specifications (`throw(...)` lists: uleb128
// type indices ending with 0, at TType base - filter - 1 for a negative filter), whichever is
// last. Nothing for a form compilers do not emit (an LPStart, another call-site encoding).
std::optional<std::pair<ExceptionTables::Lsda, size_t>>
ExceptionTables::parse_one(std::span<const uint8_t> data, size_t pos, uint64_t addr) {
  constexpr int kMaxChain = 1024; // action records followed in one chain (they can loop)
  ByteCursor c(data);
  c.seek(pos);
  Lsda l{addr + pos, {}};
  if (c.u8() != kOmit) return std::nullopt; // LPStart present: not what compilers emit
  size_t end = 0, ttype_base = 0;
  const uint8_t ttype = c.u8();
  if (ttype != kOmit) {
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
    for (int i = 0; i < kMaxChain && at < data.size(); ++i) {
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
  for (const CallSite& cs : l.sites) {
    if (cs.start + cs.length > p.end - p.begin || cs.landing_pad >= p.end - p.begin) return false;
    if (cs.landing_pad) {
      const AnalysedInstruction* pad = covering(r, p.begin + cs.landing_pad);
      if (pad && (pad->address != p.begin + cs.landing_pad || pad->function != fn)) return false;
    }
    // Code reached only from another landing pad is not analysed yet: such a region passes.
    const uint64_t end = p.begin + cs.start + cs.length;
    const AnalysedInstruction* last = ending_at(r, end, fn);
    if (!last) {
      if (covering(r, end - 1)) return false;
      continue;
    }
    if (!cs.landing_pad) continue; // a region without handler (clang: the gaps between calls)
    if (!is_call(last->address)) return false;
  }
  return true;
}

bool ExceptionTables::is_call(uint64_t address) const {
  for (const Section& sec : elf_.sections())
    if ((sec.flags & SHF_EXECINSTR) && address >= sec.addr && address - sec.addr < sec.size) {
      auto data = elf_.section_data(sec);
      if (!data || address - sec.addr >= data->size()) return false;
      auto in = decoder_.decode(data->subspan(address - sec.addr), address);
      return in && (in->flow == x86::Flow::call || in->flow == x86::Flow::call_indirect);
    }
  return false;
}

std::vector<LandingPad> ExceptionTables::match(SynthResult& result) {
  if (shipped_) {
    std::unordered_map<uint64_t, uint64_t> lsda_of; // FDE start -> LSDA
    for (size_t i = 0; i < shipped_->function_count(); ++i)
      if (const FunctionInfo& f = shipped_->function(i); f.lsda) lsda_of[f.pc_begin] = f.lsda;
    for (SynthFunction& s : result.functions)
      for (SynthFunction::Part& p : s.parts)
        if (auto it = lsda_of.find(p.begin); it != lsda_of.end() && !p.lsda) {
          p.lsda = it->second;
          assigned_.insert(it->second);
        }
  } else {
    for (const Lsda& l : lsdas_) {
      if (l.sites.empty() || assigned_.count(l.address)) continue;
      SynthFunction::Part* match = nullptr;
      bool ambiguous = false;
      for (uint32_t fn = 0; fn < result.functions.size() && !ambiguous; ++fn)
        for (SynthFunction::Part& p : result.functions[fn].parts)
          if (!p.lsda && fits(result, l, fn, p)) {
            ambiguous = match != nullptr;
            match = &p;
          }
      if (match && !ambiguous) {
        match->lsda = l.address;
        assigned_.insert(l.address);
      }
    }
  }
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
