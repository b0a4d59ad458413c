// libFuzzer target: arbitrary bytes as the data area of a perf ring buffer that `ehelf record`
// reads (the first 8 bytes set the head and tail, the rest is the ring, rounded down to a power
// of two). Every record handed out must lie inside the ring or be one wrapped copy; each is decoded
// as the recorder's events lay records out, fed to a SampleUnwinder's address-only path and
// aggregated in a Profile, whose stacks are then named. Nothing may read outside the given bytes.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <linux/perf_event.h>
#include <vector>

#include "perf/sample_unwinder.hpp"
#include "record/profile.hpp"
#include "record/ring_buffer.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ehelf;
  if (size < 16) return 0;
  size_t ring = 8;
  while (ring * 2 <= size - 8)
    ring *= 2;
  std::vector<uint8_t> bytes(data + 8, data + 8 + ring); // exactly the ring: ASan sees overreads
  perf_event_mmap_page meta{};
  uint32_t head, tail;
  std::memcpy(&head, data, 4);
  std::memcpy(&tail, data + 4, 4);
  meta.data_tail = tail;
  meta.data_head = uint64_t(tail) + head % (ring + 1); // at most one ring's worth is pending
  record::RingBuffer rb = record::RingBuffer::view(&meta, bytes.data(), ring);
  perf::EventAttr attr;
  attr.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU |
                     PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER |
                     PERF_SAMPLE_STACK_USER;
  attr.sample_regs_user = (1 << 1) | (1 << 6) | (1 << 7) | (1 << 8);
  attr.sample_stack_user = 16384;
  attr.flags = uint64_t(1) << 18;
  perf::SampleUnwinderOptions options;
  options.max_depth = 64;
  perf::SampleUnwinder unwinder(perf::RecordingInfo{}, options);
  record::Profile profile;
  perf::RawStack raw;
  // The recorder gives back a prefix of the records and reads the others again at its next
  // drain (a record timed after what it knows to be read in order): they must come again, the
  // same bytes in the same order, and the tail never passes the head.
  std::vector<std::vector<uint8_t>> first;
  for (std::span<const uint8_t> r : rb.pending())
    first.emplace_back(r.begin(), r.end());
  if (rb.corrupt_bytes() == 0 && !first.empty()) {
    const size_t given = data[8] % (first.size() + 1);
    rb.release(given);
    if (meta.data_tail > meta.data_head) std::abort();
    const auto again = rb.pending();
    if (again.size() < first.size() - given) std::abort();
    for (size_t j = 0; j + given < first.size(); ++j)
      if (!std::equal(again[j].begin(), again[j].end(), first[j + given].begin(),
                      first[j + given].end()))
        std::abort();
  }
  for (std::span<const uint8_t> r : rb.pending()) {
    if (r.size() < 8) std::abort();
    perf::Record rec;
    std::memcpy(&rec.type, r.data(), 4);
    std::memcpy(&rec.misc, r.data() + 4, 2);
    std::string why;
    if (!perf::decode_kernel_record(r.subspan(8), 8, attr, rec, why)) continue;
    if (unwinder.feed_raw(rec, raw)) profile.add(raw, unwinder.comm_of(raw.pid, raw.tid), unwinder);
  }
  rb.release();
  if (meta.data_tail > meta.data_head) std::abort();
  volatile size_t frames = 0;
  for (const perf::CountedStack& c : profile.named(unwinder))
    frames = frames + c.stack.frames.size();
  return 0;
}
