// PerfData (the perf.data reader) and what reads through it on hostile input: every truncation,
// byte overwrites at every position, lengths and counts out of range, compressed records cut or
// bombs, thousands of ids, mappings and forks, a FIFO given as a file: the reader succeeds or
// fails with a one-line error naming the file and an offset, every span it returns lies inside
// the given bytes, and the unwinder survives whatever a successful parse returns.
#include <gtest/gtest.h>

#include "perf_data_checks.hpp"

namespace ehelf::perf {
namespace {

TEST(PerfDataHostile, EveryTruncation) {
  for (const Built& b : valid_inputs()) {
    size_t decoded = 0;
    for (size_t n = 0; n < b.bytes.size(); ++n) {
      Outcome o = survive(std::span<const uint8_t>(b.bytes).first(n));
      decoded += o.decoded;
      // The file layout's sections are all needed; in the pipe layout a cut at a record's end
      // is a shorter recording.
      // A cut inside the data section is read up to the cut, and says so.
      if (b.data_offset != 16) {
        EXPECT_TRUE(!o.parsed || !o.damage.empty()) << n;
      }
    }
    if (b.data_offset == 16) { // every record's end
      EXPECT_GE(decoded, b.record_offsets.size());
    }
    // A stream cut there ends as the bytes read whole do: the same error at the same offset
    // (as damage after the records before it), or the same records.
    if (b.data_offset == 16)
      for (size_t n = 0; n < b.bytes.size(); n += 7) {
        const std::span<const uint8_t> cut = std::span<const uint8_t>(b.bytes).first(n);
        Outcome o = survive(cut);
        Streamed st = stream(cut, static_cast<unsigned>(n));
        EXPECT_EQ(st.error.empty() ? st.damage : st.error, o.error) << n;
        if (o.decoded) {
          EXPECT_LE(st.records.size(), o.records) << n; // less perf's FINISHED_ROUNDs
          EXPECT_GE(st.records.size() + 1, o.records) << n;
        }
      }
    EXPECT_TRUE(survive(b).decoded);
  }
}

TEST(PerfDataHostile, ByteOverwritesEverywhere) {
  for (const Built& b : valid_inputs()) {
    size_t decoded = 0, runs = 0;
    for (size_t at = 0; at < b.bytes.size(); ++at) {
      for (uint8_t value : {uint8_t(0), uint8_t(0xff), uint8_t(0x80), uint8_t(0x7f),
                            uint8_t(b.bytes[at] ^ 1), uint8_t(b.bytes[at] ^ 0x40)}) {
        std::vector<uint8_t> bad = b.bytes;
        bad[at] = value;
        decoded += survive(bad).decoded;
        ++runs;
        if (b.data_offset == 16 && value == 0xff) stream(bad, static_cast<unsigned>(at));
      }
    }
    // Most positions are data: a parse that fails everywhere would test nothing.
    EXPECT_GT(decoded, runs / 4);
  }
}

TEST(PerfDataHostile, RandomCorruption) {
  std::mt19937_64 rng(20240611);
  const std::vector<Built> inputs = valid_inputs();
  size_t decoded = 0;
  const int runs = 6000;
  for (int i = 0; i < runs; ++i) {
    const Built& b = inputs[rng() % inputs.size()];
    std::vector<uint8_t> bad = b.bytes;
    const int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % bad.size();
      switch (rng() % 4) {
      case 0: // a bit flip
        bad[at] ^= uint8_t(1u << (rng() % 8));
        break;
      case 1: // a random byte
        bad[at] = uint8_t(rng());
        break;
      case 2: // a 64-bit field made huge or small, at an 8-aligned place
        if (bad.size() >= 8)
          put_u64(bad, std::min(at & ~size_t(7), bad.size() - 8),
                  (rng() % 2) ? ~uint64_t(0) >> (rng() % 64) : rng() % 256);
        break;
      case 3: // a record size (u16 at 6 mod 8 in most places)
        if (bad.size() >= 8)
          put_u16(bad, std::min((at & ~size_t(7)) + 6, bad.size() - 2), uint16_t(rng()));
        break;
      }
    }
    if (rng() % 4 == 0) bad.resize(rng() % (bad.size() + 1));
    decoded += survive(bad).decoded;
    stream(bad, static_cast<unsigned>(i)); // read as a pipe: no error but good ones
  }
  EXPECT_GT(decoded, size_t(runs / 10));
}

TEST(PerfDataHostile, NotPerfData) {
  expect_error({}, 0, "truncated perf.data header");
  const std::string text = "hello, this is not a perf.data file at all\n";
  expect_error({reinterpret_cast<const uint8_t*>(text.data()), text.size()}, 0,
               "not a perf.data file");
  Built b = recording(false);
  // Big-endian magic.
  std::vector<uint8_t> be = b.bytes;
  std::memcpy(be.data(), "2ELIFREP", 8);
  expect_error(be, 0, "big-endian");
  // The older PERFFILE magic.
  std::vector<uint8_t> old = b.bytes;
  std::memcpy(old.data(), "PERFFILE", 8);
  expect_error(old, 0, "not a perf.data file");
  // Header sizes.
  expect_error(with_u64(b.bytes, 8, 0), 8, "header size");
  expect_error(with_u64(b.bytes, 8, 103), 8, "header size");
  expect_error(with_u64(b.bytes, 8, ~uint64_t(0)), 8, "header size");
  expect_error(std::span<const uint8_t>(b.bytes).first(50), 8, "header");
  expect_error(std::span<const uint8_t>(b.bytes).first(16), 8, "header");
  expect_error(std::span<const uint8_t>(b.bytes).first(12), 0, "truncated perf.data header");
}

TEST(PerfDataHostile, FileSections) {
  Built b = recording(false);
  // The data section outside the file.
  expect_error(with_u64(b.bytes, 40, b.bytes.size() + 1), 40, "data section");
  expect_error(with_u64(b.bytes, 40, ~uint64_t(0)), 40, "data section");
  expect_damage(with_u64(b.bytes, 48, ~uint64_t(0) - 8), b.bytes.size(),
                "ends inside its data section");
  // The attribute section.
  expect_error(with_u64(b.bytes, 24, ~uint64_t(0) - 7), 24, "attribute section");
  expect_error(with_u64(b.bytes, 32, b.bytes.size()), 24, "attribute section");
  expect_error(with_u64(b.bytes, 32, 0), 0, "no event attributes");
  // Absurd attribute entry sizes.
  for (uint64_t size : {uint64_t(0), uint64_t(1), uint64_t(64 + 15), uint64_t(127),
                        uint64_t(1) << 63, ~uint64_t(0), uint64_t(b.bytes.size()) * 2})
    expect_error(with_u64(b.bytes, 16, size), 16, "attribute entry size");
  // The id array outside the file, or not whole ids.
  const uint64_t ids_entry = b.attrs_offset + 112;
  expect_error(with_u64(b.bytes, ids_entry, ~uint64_t(0)), ids_entry, "id array");
  expect_error(with_u64(b.bytes, ids_entry + 8, 12), ids_entry, "id array");
  expect_error(with_u64(b.bytes, ids_entry + 8, ~uint64_t(0) - 7), ids_entry, "id array");
  // Feature sections outside the file, and a feature table cut short.
  for (size_t i = 0; i < b.feature_offsets.size(); ++i) {
    const uint64_t entry = b.features_offset + 16 * i;
    expect_error(with_u64(b.bytes, entry, ~uint64_t(0) - 4), entry, "outside the file");
    expect_error(with_u64(b.bytes, entry + 8, b.bytes.size()), entry, "outside the file");
    expect_error(with_u64(b.bytes, entry + 8, ~uint64_t(0)), entry, "outside the file");
  }
  Built bare = file_layout({dwarf_attr()}, recording_records(dwarf_attr()), {});
  expect_error(with_u64(bare.bytes, 72, 1 << 3), bare.features_offset,
               "feature 3 has no section entry");
  expect_error(with_u64(bare.bytes, 96, uint64_t(1) << 63), bare.features_offset,
               "feature 255 has no section entry");
}

TEST(PerfDataHostile, FeatureContents) {
  Built b = recording(false);
  const uint64_t build_ids = b.feature_offsets[0], hostname = b.feature_offsets[1];
  // A build-id entry's size: too small to hold one, running past its section, zero.
  for (uint16_t size : {uint16_t(0), uint16_t(8), uint16_t(35), uint16_t(0xffff)})
    expect_error(with_u16(b.bytes, build_ids + 6, size), build_ids, "build-id entry of");
  // Its file name without a NUL: the entry ends at the name's first byte.
  expect_error(with_u16(b.bytes, build_ids + 6, 8 + 4 + 24), build_ids, "build-id entry");
  std::vector<uint8_t> noname = b.bytes;
  const uint16_t entry_size = uint16_t(noname[build_ids + 6] | noname[build_ids + 7] << 8);
  std::memset(&noname[build_ids + 36], 'A', entry_size - 36);
  expect_error(noname, build_ids, "not terminated");
  // The hostname's length past its section, or its string without a NUL.
  expect_error(with_u32(b.bytes, hostname, 0xffffffff), hostname + 4, "feature 3");
  expect_error(with_u32(b.bytes, hostname, 4), hostname + 4, "feature 3");
  // The event description: its counts and sizes.
  const uint64_t desc = b.feature_offsets[4];
  for (uint32_t nr : {2u, 1000u, 0xffffffffu})
    EXPECT_FALSE(survive(with_u32(b.bytes, desc, nr)).decoded);
  for (uint32_t size : {0u, 8u, 113u, 0x7fffffffu, 0xffffffffu})
    survive(with_u32(b.bytes, desc + 4, size));
  for (uint32_t nr_ids : {2u, 0x10000000u, 0xffffffffu})
    survive(with_u32(b.bytes, desc + 8 + 112, nr_ids));
}

TEST(PerfDataHostile, RecordSizes) {
  for (bool pipe : {false, true}) {
    Built b = recording(pipe);
    for (uint64_t at : b.record_offsets) {
      for (uint16_t size : {uint16_t(0), uint16_t(1), uint16_t(7)})
        expect_error(with_u16(b.bytes, at + 6, size), at, "does not fit");
      // Past the end of the data.
      const uint64_t end = pipe ? b.bytes.size() : b.features_offset;
      if (end - at < 0xffff)
        expect_error(with_u16(b.bytes, at + 6, uint16_t(end - at + 8)), at, "does not fit");
      if (pipe)
        expect_error(std::span<const uint8_t>(b.bytes).first(at + 4), at,
                     "truncated record header");
      else // read up to the cut
        expect_damage(std::span<const uint8_t>(b.bytes).first(at + 4), at + 4,
                      "ends inside its data section");
    }
  }
  // The file layout's data section ending inside a record, or inside a record header (no
  // features after it, so that only the data section moves).
  Built b = file_layout({dwarf_attr()}, recording_records(dwarf_attr()), {});
  const uint64_t data_size = b.bytes.size() - b.data_offset;
  expect_error(with_u64(b.bytes, 48, data_size - 4), b.record_offsets.back(), "does not fit");
  expect_error(with_u64(b.bytes, 48, b.record_offsets.back() + 4 - b.data_offset),
               b.record_offsets.back(), "truncated record header");
  expect_error(with_u64(b.bytes, 48, b.record_offsets[3] + 12 - b.data_offset), b.record_offsets[3],
               "does not fit");
}

TEST(PerfDataHostile, RecordContents) {
  Built b = recording(false);
  const std::vector<uint64_t>& at = b.record_offsets;
  // An mmap2 shorter than its fields, or with its file name running into the trailer.
  auto shorter = [&](size_t index, uint16_t size) {
    std::vector<uint8_t> bad = b.bytes;
    const uint16_t old = uint16_t(bad[at[index] + 6] | bad[at[index] + 7] << 8);
    put_u16(bad, at[index] + 6, size);
    // Keep the records after it in place: a finished-round record's header fills the gap when
    // there is room for one, else the data section ends there.
    if (old - size >= 8) {
      put_u32(bad, at[index] + size, record_type::kFinishedRound);
      put_u16(bad, at[index] + size + 4, 0);
      put_u16(bad, at[index] + size + 6, uint16_t(old - size));
    }
    return bad;
  };
  expect_error(shorter(1, 8 + 24), at[1], "mmap record");
  expect_error(shorter(1, 8 + 40 + 24), at[1], "mmap record");
  expect_error(shorter(1, 8 + 8), at[1], "record too short for its sample id");
  std::vector<uint8_t> name = b.bytes;
  const size_t name_at = at[2] + 8 + 40 + 24 + 8;
  std::memset(&name[name_at], 'x', at[3] - name_at - 16); // up to the trailer
  expect_error(name, at[2], "not terminated");
  expect_error(shorter(0, 8 + 4), at[0], "sample id");
  std::vector<uint8_t> comm_name = b.bytes;
  std::memset(&comm_name[at[0] + 16], 'c', 8);
  expect_error(comm_name, at[0], "comm record");
  // Records whose trailer leaves too little for their fields.
  expect_error(shorter(4, 8 + 16 + 16), at[4], "fork/exit record is truncated");
  expect_error(shorter(11, 8 + 16 + 16), at[11], "fork/exit record is truncated");
  expect_error(shorter(8, 8 + 24), at[8], "lost record is truncated");
  // A sample without room for its registers or stack size.
  expect_error(shorter(6, 8 + 56), at[6], "shorter than");
  // A register set claimed (abi) where the kernel thread's sample has none.
  std::vector<uint8_t> abi = b.bytes;
  put_u64(abi, at[10] + 8 + 32 + 24, 2);
  expect_error(abi, at[10], "shorter than");
  // A compressed record whose payload is not zstd data.
  std::vector<uint8_t> compressed = b.bytes;
  put_u32(compressed, at[8], record_type::kCompressed);
  expect_error(compressed, at[8], "zstd");
  // Unknown record types are kept (with their time when they have a trailer).
  std::vector<uint8_t> unknown = b.bytes;
  put_u32(unknown, at[8], 21);
  EXPECT_TRUE(survive(unknown).decoded);
  put_u32(unknown, at[8], 0);
  EXPECT_TRUE(survive(unknown).decoded);
  put_u32(unknown, at[8], 0xffffffff);
  EXPECT_TRUE(survive(unknown).decoded);
}

TEST(PerfDataHostile, PipePayloads) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  auto records = recording_records(attrs[0]);
  // HEADER_TRACING_DATA (a u32 size, then that much data after the record) and AUXTRACE (a u64
  // size first): in bounds they are skipped, past the end they are an error.
  Writer tracing;
  tracing.u32(16).u32(0);
  std::vector<uint8_t> tracing_record = record(record_type::kHeaderTracingData, 0, tracing);
  tracing_record.resize(tracing_record.size() + 16, 0xee);
  Writer aux;
  aux.u64(24).u64(0).u64(0).u32(0).u32(0).u32(0).u32(0);
  std::vector<uint8_t> aux_record = record(record_type::kAuxtrace, 0, aux);
  aux_record.resize(aux_record.size() + 24, 0xdd);
  // Rebuilt rather than insert()ed: GCC 12 -O2 reports a false -Warray-bounds in insert.
  std::vector<std::vector<uint8_t>> spliced;
  for (size_t i = 0; i < records.size(); ++i) {
    if (i == 2) spliced.push_back(tracing_record); // at 2
    if (i == 4) spliced.push_back(aux_record);     // at 5, after the one above
    spliced.push_back(records[i]);
  }
  ASSERT_GT(records.size(), 4u);
  records = std::move(spliced);
  Built b = pipe_layout(attrs, records, recording_features(attrs));
  Outcome ok = survive(b);
  ASSERT_TRUE(ok.decoded) << ok.error;
  EXPECT_EQ(ok.records, records.size());
  const uint64_t t = b.record_offsets[2], x = b.record_offsets[5];
  for (uint32_t n : {uint32_t(b.bytes.size()), 0x10000u, 0xffffffffu})
    expect_error(with_u32(b.bytes, t + 8, n), t, "runs past the end");
  for (uint64_t n : {uint64_t(b.bytes.size()), uint64_t(1) << 63, ~uint64_t(0)})
    expect_error(with_u64(b.bytes, x + 8, n), x, "runs past the end");
  // The same payload sizes at the very end.
  std::vector<uint8_t> last = b.bytes;
  last.insert(last.end(), aux_record.begin(), aux_record.begin() + 8 + 48);
  expect_error(last, b.bytes.size(), "runs past the end");
  expect_stream_as_whole(b);
  // A payload of megabytes between records: a stream reads past it across its windows.
  std::vector<uint8_t> big = tracing_record;
  put_u32(big, 8, 3u << 20);
  big.resize(big.size() - 16 + (3u << 20), 0xee);
  std::vector<std::vector<uint8_t>> with_big = records;
  with_big.insert(with_big.begin() + 6, big);
  expect_stream_as_whole(pipe_layout(attrs, with_big, recording_features(attrs)));
  // The same records in the file layout.
  Built f = file_layout(attrs, records, recording_features(attrs));
  EXPECT_TRUE(survive(f).decoded);
  expect_error(with_u64(f.bytes, f.record_offsets[5] + 8, ~uint64_t(0)), f.record_offsets[5],
               "runs past the end");
  // Pipe-mode header records: an attribute too short, or whose own size is wrong.
  Built p = recording(true);
  expect_error(with_u16(p.bytes, 16 + 6, 8 + 63), 16 + 8, "shorter than");
  expect_error(with_u32(p.bytes, 16 + 8 + 4, 0xffff), 16 + 8 + 4, "attribute size");
  expect_error(with_u32(p.bytes, 16 + 8 + 4, 63), 16 + 8 + 4, "attribute size");
  // No attributes at all.
  std::vector<uint8_t> none = p.bytes;
  put_u32(none, 16, record_type::kFinishedRound);
  expect_error(none, 0, "no event attributes");
  expect_error(std::span<const uint8_t>(p.bytes).first(16), 0, "no event attributes");
}

TEST(PerfDataHostile, CompressedRecords) {
  const std::vector<TestAttr> attrs{dwarf_attr()};
  const auto plain = recording_records(attrs[0]);
  auto cut_after = compressed_records(plain, {});
  // The records' end missing: a whole zstd frame whose last record is cut.
  std::vector<uint8_t> all;
  for (const auto& r : plain)
    all.insert(all.end(), r.begin(), r.end());
  const std::vector<uint8_t> z = zstd_compress(all);
  {
    const std::vector<uint8_t> cut =
        zstd_compress(std::span<const uint8_t>(all).first(all.size() - 4));
    Built b = file_layout(attrs, {record(record_type::kCompressed, 0, cut)}, {});
    expect_error(b.bytes, b.bytes.size(), "compressed data ends inside a record");
    // The zstd frame itself cut: what was decompressed is kept (no crash, no read past it).
    std::vector<uint8_t> half(z.begin(), z.begin() + long(z.size() / 2));
    b = file_layout(attrs, {record(record_type::kCompressed, 0, half)}, {});
    survive(b.bytes, true);
  }
  // Not zstd data; an empty compressed record (nothing to decompress).
  {
    Built b = file_layout(attrs, {record(record_type::kCompressed, 0, all)}, {});
    expect_error(b.bytes, b.record_offsets[0], "zstd");
    Built empty = file_layout(attrs, {record(record_type::kCompressed, 0, {})}, {});
    EXPECT_TRUE(survive(empty.bytes, true).decoded);
  }
  // Records inside: a compressed one (no nesting), one of size 0, one running past the end.
  {
    std::vector<std::vector<uint8_t>> inner = {plain[0], record(record_type::kCompressed, 0, z)};
    Built b = file_layout(attrs, compressed_records(inner, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "inside compressed data");
    std::vector<uint8_t> zero = plain[0];
    put_u16(zero, 6, 0);
    b = file_layout(attrs, compressed_records({zero}, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "record of 0 bytes");
    std::vector<uint8_t> sample = plain[6];
    put_u64(sample, 8 + 32, 1000); // callchain nr
    b = file_layout(attrs, compressed_records({plain[0], sample}, {}), {});
    expect_error(b.bytes, b.record_offsets[0], "callchain of 1000 entries");
  }
  // A record expanding beyond what one compressed record may hold (64 MiB).
  {
    std::vector<uint8_t> big(65u << 20);
    Built b = file_layout(attrs, compressed_records({big}, {}), {});
    ASSERT_LT(b.bytes.size(), 65536u);
    expect_error(b.bytes, b.record_offsets[0], "beyond 64 MiB");
  }
  // Every byte of a compressed recording overwritten (zstd frames carry no checksum here: the
  // changes reach the records inside), and every truncation.
  {
    auto records = compressed_records(plain, {60});
    Built b = file_layout(attrs, records, recording_features(attrs));
    size_t decoded = 0;
    for (size_t at = b.data_offset; at < b.features_offset; ++at)
      for (uint8_t value : {uint8_t(0), uint8_t(0xff), uint8_t(b.bytes[at] ^ 1)}) {
        std::vector<uint8_t> bad = b.bytes;
        bad[at] = value;
        decoded += survive(bad, true).decoded;
      }
    EXPECT_GT(decoded, 0u);
    Built p = pipe_layout(attrs, records, recording_features(attrs));
    for (size_t n = 0; n < p.bytes.size(); ++n)
      survive(std::span<const uint8_t>(p.bytes).first(n), true);
  }
}

TEST(PerfDataHostile, ManyIdsStayBounded) {
  // Many attributes sharing one big id array: the ids they claim would be far more than the
  // file holds.
  TestAttr a = dwarf_attr();
  a.sample_type |= kIdentifier;
  std::vector<TestAttr> attrs(400, a);
  for (size_t i = 0; i < attrs.size(); ++i)
    attrs[i].ids = {i};
  Built b = file_layout(attrs, {}, {});
  // Every attribute's id array: the same 8000 ids (64 KB) appended at the end.
  const uint64_t ids_at = b.bytes.size();
  for (uint64_t i = 0; i < 8000; ++i) {
    b.bytes.resize(b.bytes.size() + 8);
    put_u64(b.bytes, b.bytes.size() - 8, 1000 + i);
  }
  for (size_t i = 0; i < attrs.size(); ++i) {
    put_u64(b.bytes, b.attrs_offset + 128 * i + 112, ids_at);
    put_u64(b.bytes, b.attrs_offset + 128 * i + 120, 8 * 8000);
  }
  Outcome o = survive(b);
  EXPECT_FALSE(o.parsed);
  EXPECT_NE(o.error.find("id array"), std::string::npos) << o.error;
}

// Resident memory of this process, in bytes.
uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

// Shapes that once blew up time and memory: tens of thousands of mappings in one process
// (carving them was quadratic) and thousands of forks of a process with thousands of mappings
// (each fork copied them all, names included). Memory must stay O(file): the limit is generous
// (ASan builds), far below what the old code took. The time each shape takes is recorded as the
// test's property "seconds_<mappings>_<forks>", not checked: bench/run_perf_hostile.sh
// tabulates it (bench/results/perf_hostile.md).
TEST(PerfDataHostile, ManyMappingsAndForksStayCheap) {
  const TestAttr a = dwarf_attr();
  for (const auto& [mappings, forks] : {std::pair{40000, 0}, std::pair{4000, 4000}}) {
    std::vector<std::vector<uint8_t>> r;
    for (int i = 0; i < mappings; ++i) {
      TestMmap m;
      m.pid = m.tid = 100;
      m.start = 0x10000000 + 0x2000 * uint64_t(i);
      m.len = 0x1000;
      m.filename = fmt::format("/nonexistent/ehelf-test/library-with-a-long-name-{}.so", i);
      r.push_back(mmap2(a, m, {100, 100, 1, 101}));
    }
    for (int i = 0; i < forks; ++i)
      r.push_back(task(record_type::kFork, a, 1000 + i, 100, 1000 + i, 100, {100, 100, 2, 101}));
    Built b = file_layout({a}, r, {});
    const uint64_t before = resident_bytes();
    const auto start = std::chrono::steady_clock::now();
    auto d = PerfData::from_bytes(b.bytes, kName);
    ASSERT_TRUE(d) << d.error().to_string();
    auto records = d->records();
    ASSERT_TRUE(records);
    SampleUnwinder u(*d, {});
    SampleStack st;
    for (const Record& rec : *records)
      u.feed(rec, st);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    RecordProperty(fmt::format("seconds_{}_{}", mappings, forks), fmt::format("{:.3f}", seconds));
    const uint64_t grown = resident_bytes() - std::min(before, resident_bytes());
    EXPECT_LT(grown, uint64_t(400) << 20)
        << mappings << " mappings, " << forks << " forks: " << (grown >> 20) << " MiB";
    EXPECT_EQ(u.stats().modules_missing, uint64_t(mappings));
  }
}

TEST(PerfDataHostile, MappedFifo) {
  // A recording whose mapping names a FIFO (or a directory): the unwinder must not open it for
  // reading (a FIFO would block until a writer came).
  const std::string fifo = ::testing::TempDir() + "ehelf_test_perf_fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  TestAttr a = dwarf_attr();
  TestMmap m{.pid = 1, .tid = 1, .start = kProgStart, .len = 0x1000, .filename = fifo};
  TestMmap dir = m;
  dir.start = kLibStart;
  dir.filename = ::testing::TempDir();
  TestSample s;
  s.ip = kProgStart + 0x10;
  s.pid = s.tid = 1;
  s.time = 5;
  s.regs = {0, 0, kUserSp, s.ip, 0};
  s.stack = pattern(16, 0);
  s.dyn_size = 16;
  Outcome o = survive(file_layout(
      {a},
      {mmap2(a, m, {1, 1, 1, 101}), mmap2(a, dir, {1, 1, 2, 101}), sample_record(a, kMiscUser, s)},
      {}));
  EXPECT_TRUE(o.decoded) << o.error;
  EXPECT_EQ(o.samples, 1u);
  std::remove(fifo.c_str());
}

} // namespace
} // namespace ehelf::perf
