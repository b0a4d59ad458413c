// EhElfObject: a compiled eh_elf, checked (eh_elf_check.hpp) and then loaded with dlopen from the
// very file descriptor that was checked; its info block is checked against the source's build-id.
#pragma once

#include <memory>
#include <span>
#include <string>

#include "ehelf/eh_elf.h"
#include "support/result.hpp"

namespace ehelf {

class EhElfObject {
public:
  // Loads `path`; refuses anything check_eh_elf_image refuses, an ABI version mismatch, and a
  // build-id mismatch when `expected_build_id` is non-empty.
  static Result<std::unique_ptr<EhElfObject>> load(const std::string& path,
                                                   std::span<const uint8_t> expected_build_id = {});
  // The same for an open file (taken over, closed on failure); `name` is for messages. Only a
  // regular file is read; the object is loaded through /proc/self/fd, so the loaded file is the
  // checked one, and the descriptor stays open while the object is loaded (the loader knows the
  // object by that name, which must not come to mean another file).
  static Result<std::unique_ptr<EhElfObject>> load_fd(int fd, const std::string& name,
                                                      std::span<const uint8_t> expected_build_id);
  ~EhElfObject();
  EhElfObject(const EhElfObject&) = delete;
  EhElfObject& operator=(const EhElfObject&) = delete;

  const ehelf_info& info() const { return *info_; }
  int unwind_local(uint64_t pc, ehelf_context_t* ctx) const { return local_(pc, ctx); }
  int unwind_remote(uint64_t pc, ehelf_context_t* ctx, ehelf_deref_fn deref, void* arg) const {
    return remote_(pc, ctx, deref, arg);
  }

private:
  EhElfObject() = default;
  void* handle_ = nullptr;
  int fd_ = -1;
  const ehelf_info* info_ = nullptr;
  int (*local_)(uint64_t, ehelf_context_t*) = nullptr;
  int (*remote_)(uint64_t, ehelf_context_t*, ehelf_deref_fn, void*) = nullptr;
};

} // namespace ehelf
