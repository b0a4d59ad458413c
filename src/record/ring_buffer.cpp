#include "record/ring_buffer.hpp"

#include <cstring>
#include <linux/perf_event.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

namespace ehelf::record {

Result<RingBuffer> RingBuffer::map(int fd, size_t data_pages) {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (data_pages == 0 || (data_pages & (data_pages - 1)))
    return Error::plain(fmt::format("ring of {} pages: not a power of two", data_pages));
  RingBuffer r;
  r.mapped_ = (data_pages + 1) * page;
  void* p = ::mmap(nullptr, r.mapped_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED)
    return Error::plain(
        fmt::format("mmap of a {} KiB ring: {}", r.mapped_ / 1024, std::strerror(errno)));
  r.base_ = p;
  r.meta_ = static_cast<perf_event_mmap_page*>(p);
  r.data_ = static_cast<const uint8_t*>(p) + page;
  r.size_ = data_pages * page;
  r.read_to_ = r.round_end_ = r.meta_->data_tail;
  return r;
}

RingBuffer RingBuffer::view(perf_event_mmap_page* meta, const uint8_t* data, size_t size) {
  RingBuffer r;
  r.meta_ = meta;
  r.data_ = data;
  r.size_ = size;
  r.read_to_ = r.round_end_ = meta->data_tail;
  return r;
}

RingBuffer::RingBuffer(RingBuffer&& o) noexcept
    : base_(o.base_), mapped_(o.mapped_), meta_(o.meta_), data_(o.data_), size_(o.size_),
      read_to_(o.read_to_), round_end_(o.round_end_), corrupt_bytes_(o.corrupt_bytes_),
      records_(std::move(o.records_)), ends_(std::move(o.ends_)), scratch_(std::move(o.scratch_)) {
  o.base_ = nullptr;
}

RingBuffer::~RingBuffer() {
  if (base_) ::munmap(base_, mapped_);
}

std::span<const std::span<const uint8_t>> RingBuffer::pending() {
  records_.clear();
  ends_.clear();
  // Acquire: the records' bytes are visible once their head is.
  const uint64_t head = __atomic_load_n(&meta_->data_head, __ATOMIC_ACQUIRE);
  uint64_t pos = read_to_;
  bool wrapped = false;
  // A tail the kernel never leaves (unaligned, or more than a ring behind the head, or past it):
  // nothing after it can be framed.
  if ((pos & 7) || head - pos > size_) {
    corrupt_bytes_ += head > pos ? head - pos : 0;
    pos = head;
  }
  while (head - pos >= sizeof(perf_event_header)) {
    // Records are 8-byte aligned and the ring a multiple of 8, so a header never wraps.
    perf_event_header h;
    std::memcpy(&h, data_ + (pos & (size_ - 1)), sizeof h);
    if (h.size < sizeof h || h.size > head - pos || h.size > size_ || (h.size & 7)) {
      corrupt_bytes_ += head - pos;
      pos = head;
      break;
    }
    const size_t at = pos & (size_ - 1);
    if (at + h.size <= size_) {
      records_.emplace_back(data_ + at, h.size);
    } else {
      if (wrapped) break; // one scratch record per round: the next round takes the rest
      wrapped = true;
      const size_t first = size_ - at;
      scratch_.resize(h.size);
      std::memcpy(scratch_.data(), data_ + at, first);
      std::memcpy(scratch_.data() + first, data_, h.size - first);
      records_.emplace_back(scratch_.data(), h.size);
    }
    pos += h.size;
    ends_.push_back(pos);
  }
  round_end_ = pos;
  return records_;
}

void RingBuffer::release(size_t count) {
  // (All of them: past any bytes found corrupt too.)
  read_to_ = count >= records_.size() ? round_end_ : count ? ends_[count - 1] : read_to_;
  round_end_ = read_to_;
  records_.clear();
  ends_.clear();
  // Release: our reads of the records happen before the kernel may overwrite them.
  __atomic_store_n(&meta_->data_tail, read_to_, __ATOMIC_RELEASE);
}

} // namespace ehelf::record
