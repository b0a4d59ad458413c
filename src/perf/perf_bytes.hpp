// The byte-level pieces perf.data's reader shares between its file header's parser
// (perf_data.cpp) and its records' decoder (record_decode.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <linux/perf_event.h>
#include <string_view>

#include "perf/perf_data.hpp"
#include "support/byte_cursor.hpp"

namespace ehelf::perf {

// Record header misc bits and read_format bits, as <linux/perf_event.h> names them.
inline constexpr uint16_t kMiscCommExec = PERF_RECORD_MISC_COMM_EXEC;
inline constexpr uint16_t kMiscMmapBuildId = PERF_RECORD_MISC_MMAP_BUILD_ID;
// perf's own (PERF_RECORD_MISC_BUILD_ID_SIZE in its tools, not in the kernel's header): a build id
// feature record says its id's size.
inline constexpr uint16_t kMiscBuildIdSize = 1 << 15;
inline constexpr uint64_t kFormatTotalTimeEnabled = PERF_FORMAT_TOTAL_TIME_ENABLED;
inline constexpr uint64_t kFormatTotalTimeRunning = PERF_FORMAT_TOTAL_TIME_RUNNING;
inline constexpr uint64_t kFormatId = PERF_FORMAT_ID;
inline constexpr uint64_t kFormatGroup = PERF_FORMAT_GROUP;
inline constexpr uint64_t kFormatLost = PERF_FORMAT_LOST;
inline constexpr uint64_t kBranchHwIndex = PERF_SAMPLE_BRANCH_HW_INDEX;

// A NUL-terminated string inside `c`'s remaining bytes, up to `limit` of them; the cursor moves
// past the limit. Fails the cursor if no NUL is found.
inline std::string_view read_cstring(ByteCursor& c, size_t limit) {
  const size_t n = std::min(limit, c.remaining());
  const uint8_t* p = c.data().data() + c.pos();
  const void* nul = std::memchr(p, 0, n);
  if (!nul) {
    c.fail();
    return {};
  }
  std::string_view s(reinterpret_cast<const char*>(p),
                     static_cast<size_t>(static_cast<const uint8_t*>(nul) - p));
  c.skip(n);
  return s;
}

// The number of u64 words of a sample_id trailer, and the position of its time in it.
struct TrailerLayout {
  size_t words = 0;
  int time_word = -1;
};

inline TrailerLayout trailer_layout(const EventAttr& a) {
  TrailerLayout t;
  const uint64_t st = a.sample_type;
  if (st & sample::kTid) ++t.words;
  if (st & sample::kTime) t.time_word = static_cast<int>(t.words++);
  if (st & sample::kId) ++t.words;
  if (st & sample::kStreamId) ++t.words;
  if (st & sample::kCpu) ++t.words;
  if (st & sample::kIdentifier) ++t.words;
  return t;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

} // namespace ehelf::perf
