#include "elf/mapped_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support/read_fully.hpp"

namespace ehelf {
namespace {

// Mappings alive at once with the guard; more are read into memory instead. ehelf perf keeps
// one per module of every process it follows; 1024 leaves a wide margin.
constexpr int kSlots = 1024;

constexpr uintptr_t kFree = 0, kClaiming = 1;

struct Slot {
  std::atomic<uintptr_t> begin{kFree}; // or kClaiming, or the mapping's first byte
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> truncated{false};
};
Slot g_slots[kSlots];
struct sigaction g_previous {};
uintptr_t g_page_size = 4096;

// Async-signal-safe: atomics, mmap and sigaction only.
void on_sigbus(int sig, siginfo_t* info, void* context) {
  auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin <= kClaiming || addr < begin || addr >= s.end.load(std::memory_order_acquire))
      continue;
    void* page = reinterpret_cast<void*>(addr & ~(g_page_size - 1));
    if (::mmap(page, g_page_size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
        MAP_FAILED)
      break;
    s.truncated.store(true, std::memory_order_release);
    return; // the read runs again, on zeros
  }
  // Not ours: whoever handled SIGBUS before, else the default action.
  if ((g_previous.sa_flags & SA_SIGINFO) && g_previous.sa_sigaction) {
    g_previous.sa_sigaction(sig, info, context);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
  } else {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    ::sigaction(SIGBUS, &dfl, nullptr); // the fault repeats and ends the process as before
  }
}

void install_guard() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
    struct sigaction sa {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    ::sigemptyset(&sa.sa_mask);
    ::sigaction(SIGBUS, &sa, &g_previous);
  });
}

int claim_slot(const uint8_t* data, size_t size) {
  install_guard();
  auto begin = reinterpret_cast<uintptr_t>(data);
  for (int i = 0; i < kSlots; ++i) {
    uintptr_t expected = kFree;
    Slot& s = g_slots[i];
    if (!s.begin.compare_exchange_strong(expected, kClaiming, std::memory_order_acq_rel)) continue;
    // The handler looks at a slot only once begin is the address, and then sees this end.
    s.truncated.store(false, std::memory_order_relaxed);
    s.end.store(begin + size, std::memory_order_relaxed);
    s.begin.store(begin, std::memory_order_release);
    return i;
  }
  return -1;
}

} // namespace

Result<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return Error::plain(std::strerror(errno)).in_file(path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return Error::plain(std::strerror(e)).in_file(path);
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error::plain("not a regular file").in_file(path);
  }
  std::unique_ptr<MappedFile> f(new MappedFile);
  f->path_ = path;
  f->size_ = static_cast<size_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return Error::plain(std::string("mmap: ") + std::strerror(e)).in_file(path);
    }
    f->data_ = static_cast<const uint8_t*>(p);
    f->slot_ = claim_slot(f->data_, f->size_);
    if (f->slot_ < 0) { // no guard: a copy cannot fault
      ::munmap(p, f->size_);
      f->data_ = nullptr;
      f->copy_.resize(f->size_);
      if (auto st2 = read_fully(fd, f->copy_); !st2) {
        ::close(fd);
        return std::move(st2).error().in_file(path);
      }
      f->data_ = f->copy_.data();
    }
  }
  ::close(fd);
  return f;
}

bool MappedFile::truncated() const {
  return slot_ >= 0 && g_slots[slot_].truncated.load(std::memory_order_acquire);
}

Status MappedFile::check_intact() const {
  if (!truncated()) return Ok{};
  return Error::plain("the file was truncated while being read (it changed on disk)")
      .in_file(path_);
}

void MappedFile::release_pages(uint64_t offset, uint64_t size) const {
  if (slot_ < 0 || offset >= size_) return;
  size = std::min<uint64_t>(size, size_ - offset);
  const uint64_t page = g_page_size;
  const uint64_t begin = (offset + page - 1) / page * page, end = (offset + size) / page * page;
  if (begin < end) ::madvise(const_cast<uint8_t*>(data_) + begin, end - begin, MADV_DONTNEED);
}

MappedFile::~MappedFile() {
  if (slot_ >= 0) {
    g_slots[slot_].begin.store(kFree, std::memory_order_release);
    ::munmap(const_cast<uint8_t*>(data_), size_);
  }
}

} // namespace ehelf
