#include "runtime/memory.hpp"

#include <cerrno>
#include <pthread.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

namespace ehelf {

AddressRange current_thread_stack() {
  // Initial-exec: 16 bytes of static TLS, so that reading it never allocates, also in a
  // dlopened library (the general-dynamic model may allocate on a thread's first access).
  __attribute__((tls_model("initial-exec"))) thread_local AddressRange cached;
  if (cached.end) return cached;
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) != 0) return {};
  void* addr = nullptr;
  size_t size = 0;
  pthread_attr_getstack(&attr, &addr, &size);
  pthread_attr_destroy(&attr);
  cached.begin = reinterpret_cast<uint64_t>(addr);
  cached.end = cached.begin + size;
  return cached;
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
      if (a >= addr && a < addr + size) dst[a - addr] = static_cast<uint8_t>(uint64_t(word) >> (8 * b));
    }
  }
  return true;
}

} // namespace ehelf
