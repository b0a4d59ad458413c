#include "runtime/memory.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

namespace ehelf {

namespace {

// The mapping of /proc/self/maps holding `sp`, read with plain system calls into a fixed buffer
// (no stdio, no allocation: async-signal-safe). For the main thread's "[stack]" the range
// starts where the stack may grow to (RLIMIT_STACK below its end, not below the mapping before
// it), as pthread_getattr_np reports it, so that deeper calls stay inside the cached range.
AddressRange mapping_holding(uint64_t sp) {
  const int fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  uint64_t lo = 0, hi = 0, prev_end = 0;
  int field = 0;     // 0: lo, 1: hi, 2: the rest of the line
  char tail[7] = {}; // the line's last characters: its path ends "[stack]"
  // Appends `len` characters to the tail, keeping the last seven.
  auto push_tail = [&](const char* p, size_t len) {
    if (len >= sizeof tail) {
      std::memcpy(tail, p + len - sizeof tail, sizeof tail);
    } else {
      std::memmove(tail, tail + len, sizeof tail - len);
      std::memcpy(tail + sizeof tail - len, p, len);
    }
  };
  AddressRange found;
  bool done = false;
  auto end_line = [&] {
    if (field == 2 && sp >= lo && sp < hi) {
      found = AddressRange{lo, hi};
      if (std::memcmp(tail, "[stack]", 7) == 0) {
        rlimit rl{};
        uint64_t room = ::getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                            ? uint64_t(rl.rlim_cur)
                            : uint64_t(8) << 20;
        uint64_t deepest = hi > room ? hi - room : 0;
        found.begin = std::min(lo, std::max(deepest, prev_end));
      }
      done = true;
    }
    prev_end = hi;
    lo = hi = 0;
    field = 0;
    std::memset(tail, 0, sizeof tail);
  };
  for (ssize_t n; !done && (n = ::read(fd, buf, sizeof buf)) > 0;) {
    const char* p = buf;
    const char* const end = buf + n;
    while (p < end && !done) {
      if (field == 2) { // the rest of the line: only its end matters
        const auto* nl = static_cast<const char*>(std::memchr(p, '\n', size_t(end - p)));
        push_tail(p, size_t((nl ? nl : end) - p));
        if (!nl) break;
        end_line();
        p = nl + 1;
        continue;
      }
      const char ch = *p++;
      const int digit = ch >= '0' && ch <= '9'   ? ch - '0'
                        : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                                                 : -1;
      if (digit >= 0) {
        uint64_t& v = field == 0 ? lo : hi;
        v = v << 4 | uint64_t(digit);
      } else if (ch == '\n') {
        end_line();
      } else {
        field = field == 0 && ch == '-' ? 1 : 2;
      }
    }
  }
  ::close(fd);
  return found;
}

} // namespace

AddressRange current_thread_stack() {
  return thread_stack_at(reinterpret_cast<uint64_t>(__builtin_frame_address(0)));
}

AddressRange thread_stack_at(uint64_t sp) {
  // Initial-exec: 16 bytes of static TLS, so that reading it never allocates, also in a
  // dlopened library (the general-dynamic model may allocate on a thread's first access).
  __attribute__((tls_model("initial-exec"))) thread_local AddressRange cached;
  if (cached.end && sp >= cached.begin && sp < cached.end) return cached;
  // On an alternate signal stack the stack pointer says nothing of the thread's own stack:
  // keep what an earlier call found (the alternate stack is the caller's to add). Checked by
  // range, not SS_ONSTACK, which is about the stack this code runs on.
  stack_t ss{};
  if (cached.end && ::sigaltstack(nullptr, &ss) == 0 && !(ss.ss_flags & SS_DISABLE) &&
      sp - reinterpret_cast<uint64_t>(ss.ss_sp) < ss.ss_size)
    return cached;
  AddressRange r = mapping_holding(sp);
  if (r.end) cached = r;
  return r;
}

bool read_own_memory(uint64_t addr, void* out, size_t size) {
  iovec local{out, size};
  iovec remote{reinterpret_cast<void*>(addr), size};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

bool ProcessMemory::read(uint64_t addr, void* out, size_t size) {
  if (!use_peek_) {
    iovec local{out, size};
    iovec remote{reinterpret_cast<void*>(addr), size};
    ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(size)) return true;
    if (n >= 0 || (errno != EPERM && errno != ENOSYS)) return false;
    use_peek_ = true;
  }
  // Word-wise PTRACE_PEEKDATA (the tracee must be ptrace-stopped by us).
  auto* dst = static_cast<uint8_t*>(out);
  uint64_t aligned = addr & ~uint64_t(7);
  for (uint64_t at = aligned; at < addr + size; at += 8) {
    errno = 0;
    long word = ::ptrace(PTRACE_PEEKDATA, pid_, reinterpret_cast<void*>(at), nullptr);
    if (errno != 0) return false;
    for (unsigned b = 0; b < 8; ++b) {
      uint64_t a = at + b;
      if (a >= addr && a < addr + size)
        dst[a - addr] = static_cast<uint8_t>(uint64_t(word) >> (8 * b));
    }
  }
  return true;
}

} // namespace ehelf
