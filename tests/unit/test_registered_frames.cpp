// RegisteredFrames (the __register_frame family's registrations, as modules a walk finds): the
// rows of a registered copy of a real library's .eh_frame against the library's own
// .eh_frame_hdr lookup; JIT-like FDEs far from their code (a wide search table); FDE tables;
// removal; hostile registrations; lookups while other threads register and remove.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <sys/mman.h>
#include <thread>
#include <vector>

#include "dwarf/eh_frame_hdr.hpp"
#include "dwarf/row_lookup.hpp"
#include "elf/elf_file.hpp"
#include "runtime/registered_frames.hpp"
#include "test_support.hpp"

#include "../eh/jit_code.hpp" // put32, put64, pad_and_set_length

namespace ehelf {
namespace {

using Registration = RegisteredFrames::Registration;

Registration section(const void* begin, void* object = nullptr) {
  Registration r;
  r.begin = begin;
  r.object = object;
  return r;
}

// Rows equal but for where they are (`delta` apart).
void expect_same_row(const FoundRow& want, const FoundRow& got, uint64_t delta) {
  EXPECT_EQ(want.cfa.kind, got.cfa.kind);
  EXPECT_EQ(want.cfa.reg, got.cfa.reg);
  EXPECT_EQ(want.cfa.offset, got.cfa.offset);
  ASSERT_EQ(want.count, got.count);
  for (unsigned i = 0; i < want.count; ++i) {
    EXPECT_EQ(want.columns[i].column, got.columns[i].column);
    EXPECT_EQ(want.columns[i].rule.kind, got.columns[i].rule.kind);
    EXPECT_EQ(want.columns[i].rule.offset, got.columns[i].rule.offset);
  }
  ASSERT_EQ(want.expression_count, got.expression_count);
  for (unsigned i = 0; i < want.expression_count; ++i)
    EXPECT_TRUE(std::equal(want.expressions[i].begin(), want.expressions[i].end(),
                           got.expressions[i].begin(), got.expressions[i].end()));
  EXPECT_EQ(want.begin + delta, got.begin);
  EXPECT_EQ(want.end + delta, got.end);
  EXPECT_EQ(want.function.pc_begin + delta, got.function.pc_begin);
  EXPECT_EQ(want.function.fde_offset, got.function.fde_offset);
}

// libc's .eh_frame, registered from a copy: its FDEs' pcrel pointers now say libc's code is
// `delta` from where the file links it. Every FDE's first and last address gives the row the
// file's own search table gives.
TEST(RegisteredFrames, ACopyOfLibcsEhFrameGivesLibcsRows) {
  auto elf = ElfFile::open(test::libc_path());
  ASSERT_TRUE(elf);
  const Section* hdr = (*elf)->find_section(".eh_frame_hdr");
  const Section* eh = (*elf)->find_section(".eh_frame");
  ASSERT_TRUE(hdr && eh);
  auto h = (*elf)->section_data(*hdr);
  auto e = (*elf)->section_data(*eh);
  ASSERT_TRUE(h && e);
  RowLookup file;
  ASSERT_TRUE(file.init(CfiImage{*h, hdr->addr, *e, eh->addr}));
  std::vector<uint8_t> copy(e->begin(), e->end());
  copy.resize(copy.size() + 4, 0); // the terminator (libc's section has one already)
  const uint64_t delta = reinterpret_cast<uint64_t>(copy.data()) - eh->addr;

  RegisteredFrames frames;
  EXPECT_EQ(frames.find(0x1000), nullptr);
  const uint64_t before = frames.generation();
  ASSERT_TRUE(frames.add(section(copy.data())));
  EXPECT_NE(frames.generation(), before);
  EXPECT_EQ(frames.size(), 1u);
  auto parsed = parse_eh_frame_hdr(*h, hdr->addr);
  ASSERT_TRUE(parsed);
  size_t checked = 0;
  for (const auto& entry : parsed->table) {
    FoundRow want;
    if (file.find(entry.initial_location, want) != RowStatus::Found) continue;
    for (uint64_t pc : {want.function.pc_begin, want.function.pc_end - 1}) {
      if (file.find(pc, want) != RowStatus::Found) continue;
      const Module* m = frames.find(pc + delta);
      ASSERT_NE(m, nullptr) << std::hex << pc;
      EXPECT_EQ(m->bias, 0u);
      const RowLookup* rows = m->data->row_lookup();
      ASSERT_NE(rows, nullptr);
      FoundRow got;
      ASSERT_EQ(rows->find(pc + delta, got), RowStatus::Found) << std::hex << pc;
      expect_same_row(want, got, delta);
      // What _Unwind_Find_FDE answers: the FDE in the registered bytes.
      EXPECT_EQ(m->data->loaded.eh_frame + got.function.fde_offset,
                reinterpret_cast<uint64_t>(copy.data()) + want.function.fde_offset);
      ++checked;
    }
  }
  EXPECT_GT(checked, 2000u);
  EXPECT_EQ(frames.remove(copy.data()), std::optional<void*>(nullptr));
  EXPECT_EQ(frames.find(parsed->table[0].initial_location + delta), nullptr);
  EXPECT_EQ(frames.remove(copy.data()), std::nullopt);
  EXPECT_EQ(frames.size(), 0u);
}

// A CIE (absolute pointers, cfa = rsp+8) and one FDE per function: pc, size 32, its program
// "+4: cfa = rsp+16". FDE i is at fde_offsets[i].
std::vector<uint8_t> jit_frames(const std::vector<uint64_t>& pcs,
                                std::vector<size_t>* fde_offsets = nullptr) {
  std::vector<uint8_t> v;
  put32(v, 0);
  put32(v, 0);
  v.insert(v.end(), {1, 'z', 'R', 0, 1, 0x78, 16, 1, 0x00});
  v.insert(v.end(), {0x0c, 7, 8, 0x90, 1});
  pad_and_set_length(v, 0);
  for (uint64_t pc : pcs) {
    const size_t fde = v.size();
    if (fde_offsets) fde_offsets->push_back(fde);
    put32(v, 0);
    put32(v, uint32_t(v.size()));
    put64(v, pc);
    put64(v, 32);
    v.push_back(0);
    v.insert(v.end(), {0x44, 0x0e, 16});
    pad_and_set_length(v, fde);
  }
  put32(v, 0);
  return v;
}

void expect_jit_rows(const RegisteredFrames& frames, uint64_t pc) {
  const Module* m = frames.find(pc + 5);
  ASSERT_NE(m, nullptr) << std::hex << pc;
  FoundRow row;
  ASSERT_EQ(m->data->row_lookup()->find(pc + 5, row), RowStatus::Found);
  EXPECT_EQ(row.cfa.offset, 16);
  EXPECT_EQ(row.begin, pc + 4);
  ASSERT_EQ(m->data->row_lookup()->find(pc + 1, row), RowStatus::Found);
  EXPECT_EQ(row.cfa.offset, 8);
  EXPECT_EQ(frames.find(pc + 32), nullptr);
}

// Code 16 GiB and more away from its FDEs (a JIT's code in one mapping, its FDEs on the heap):
// the search table's entries do not fit 32 bits.
TEST(RegisteredFrames, FdesFarFromTheirCodeUseAWideSearchTable) {
  std::vector<uint8_t> probe(1);
  const uint64_t far =
      (reinterpret_cast<uint64_t>(probe.data()) + (uint64_t(16) << 30)) & ~0xfffull;
  const std::vector<uint64_t> pcs = {far, far + 0x1000, far - (uint64_t(4) << 30)};
  std::vector<uint8_t> bytes = jit_frames(pcs);
  RegisteredFrames frames;
  ASSERT_TRUE(frames.add(section(bytes.data())));
  const Module* m = frames.find(far);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->data->made_hdr[3], 0x3c); // datarel | sdata8
  for (uint64_t pc : pcs)
    expect_jit_rows(frames, pc);
  // Between the functions: nothing.
  EXPECT_EQ(frames.find(far + 0x800), nullptr);
}

// __register_frame_info_table: an array of FDE pointers, the FDEs anywhere after their CIE.
TEST(RegisteredFrames, ATableOfFdePointers) {
  const uint64_t base = 0x7e0000000000;
  std::vector<size_t> offsets;
  std::vector<uint8_t> bytes = jit_frames({base, base + 0x100, base + 0x200}, &offsets);
  // Only the first and last listed.
  void* table[3] = {bytes.data() + offsets[0], bytes.data() + offsets[2], nullptr};
  static char object;
  Registration r = section(table, &object);
  r.table = true;
  RegisteredFrames frames;
  ASSERT_TRUE(frames.add(r));
  expect_jit_rows(frames, base);
  expect_jit_rows(frames, base + 0x200);
  EXPECT_EQ(frames.find(base + 0x105), nullptr);
  EXPECT_EQ(frames.remove(table), std::optional<void*>(&object));
}

// An FDE registered alone (LLVM's JIT registers each FDE so for LLVM's libunwind; libgcc takes it
// too): its CIE is before it, outside the records registered.
TEST(RegisteredFrames, AnFdeRegisteredAlone) {
  const uint64_t base = 0x7e8000000000;
  std::vector<size_t> offsets;
  std::vector<uint8_t> bytes = jit_frames({base, base + 0x100}, &offsets);
  std::vector<uint8_t> one = bytes; // the second FDE's first word: the terminator after the first
  std::memset(one.data() + offsets[1], 0, 4);
  RegisteredFrames frames;
  ASSERT_TRUE(frames.add(section(one.data() + offsets[0])));
  expect_jit_rows(frames, base);
  EXPECT_EQ(frames.find(base + 0x105), nullptr);
  const Module* m = frames.find(base);
  FoundRow row;
  ASSERT_EQ(m->data->row_lookup()->find(base, row), RowStatus::Found);
  EXPECT_EQ(m->data->loaded.eh_frame + row.function.fde_offset,
            reinterpret_cast<uint64_t>(one.data() + offsets[0]));
}

// Registrations that cannot be unwound: each refused (but registered, its object given back),
// no read outside what is mapped, no fault.
TEST(RegisteredFrames, HostileRegistrationsAreRefusedWithoutFaulting) {
  RegisteredFrames frames;
  const long page = sysconf(_SC_PAGESIZE);
  auto* mem = static_cast<uint8_t*>(
      mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  ASSERT_EQ(munmap(mem + page, page), 0);
  static char object;
  // Records running into the unmapped page (a length word, never a terminator).
  uint8_t* tail = mem + page - 8;
  const uint32_t length = 4;
  std::memcpy(tail, &length, 4);
  std::memcpy(tail + 4, "\0\0\0\0", 4);
  EXPECT_FALSE(frames.add(section(tail, &object)));
  EXPECT_EQ(frames.remove(tail), std::optional<void*>(&object));
  // An unmapped address, as a section and as a table.
  EXPECT_FALSE(frames.add(section(mem + page)));
  Registration t = section(mem + page);
  t.table = true;
  EXPECT_FALSE(frames.add(t));
  // A table whose pointers lead to unmapped memory and to garbage.
  std::vector<uint8_t> garbage(256, 0xa5);
  void* table[3] = {mem + page + 64, garbage.data() + 8, nullptr};
  Registration g = section(table);
  g.table = true;
  EXPECT_FALSE(frames.add(g));
  // Garbage as a section: whatever it holds, lookups answer.
  for (int seed = 0; seed < 200; ++seed) {
    std::vector<uint8_t> junk(512);
    uint32_t x = 2463534242u + uint32_t(seed);
    for (auto& b : junk) {
      x ^= x << 13, x ^= x >> 17, x ^= x << 5;
      b = uint8_t(x);
    }
    std::memcpy(junk.data(), "\x40\0\0\0", 4); // a first record of 64 bytes
    junk.resize(junk.size() + 4, 0);
    (void)frames.add(section(junk.data()));
    for (uint64_t pc = 0; pc < 64; ++pc)
      if (const Module* m = frames.find(pc * 0x1111111111ull))
        if (const RowLookup* rows = m->data->row_lookup()) {
          FoundRow row;
          (void)rows->find(pc * 0x1111111111ull, row);
        }
    (void)frames.remove(junk.data());
  }
  EXPECT_EQ(frames.size(), 3u); // the unmapped section and the two tables, not removed
  munmap(mem, page);
}

// Lookups of a steady registration never fail while another thread registers and removes
// others (the index they read is never the one being rewritten).
TEST(RegisteredFrames, LookupsWhileOthersRegisterAndRemove) {
  const uint64_t base = 0x7d0000000000;
  std::vector<uint8_t> steady = jit_frames({base, base + 0x1000});
  std::vector<std::vector<uint8_t>> churn;
  for (int i = 0; i < 16; ++i)
    churn.push_back(jit_frames({base + 0x100000 * uint64_t(i + 1)}));
  RegisteredFrames frames;
  ASSERT_TRUE(frames.add(section(steady.data())));
  std::atomic<bool> done{false};
  std::atomic<uint64_t> misses{0}, lookups{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t)
    readers.emplace_back([&] {
      while (!done.load(std::memory_order_relaxed)) {
        for (uint64_t pc : {base + 5, base + 0x1005})
          if (!frames.find(pc)) misses.fetch_add(1);
        lookups.fetch_add(2, std::memory_order_relaxed);
      }
    });
  for (int round = 0; round < 300; ++round)
    for (auto& c : churn) {
      ASSERT_TRUE(frames.add(section(c.data())));
      ASSERT_EQ(frames.remove(c.data()), std::optional<void*>(nullptr));
    }
  done = true;
  for (auto& r : readers)
    r.join();
  EXPECT_EQ(misses.load(), 0u) << "of " << lookups.load();
  EXPECT_GT(lookups.load(), 0u);
}

} // namespace
} // namespace ehelf
