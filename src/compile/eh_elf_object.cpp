#include "compile/eh_elf_object.hpp"

#include <cstring>
#include <dlfcn.h>
#include <fmt/format.h>

namespace ehelf {

Result<std::unique_ptr<EhElfObject>> EhElfObject::load(const std::string& path,
                                                       std::span<const uint8_t> expected) {
  // A name without a slash would make dlopen search the library path, not the current directory.
  std::string where = path.find('/') == std::string::npos ? "./" + path : path;
  void* h = ::dlopen(where.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return Error::plain(fmt::format("cannot load eh_elf: {}", ::dlerror())).in_file(path);
  std::unique_ptr<EhElfObject> o(new EhElfObject);
  o->handle_ = h;
  o->info_ = static_cast<const ehelf_info*>(::dlsym(h, EHELF_INFO_SYMBOL));
  o->local_ = reinterpret_cast<int (*)(uint64_t, ehelf_context_t*)>(
      ::dlsym(h, EHELF_UNWIND_LOCAL_SYMBOL));
  o->remote_ = reinterpret_cast<int (*)(uint64_t, ehelf_context_t*, ehelf_deref_fn, void*)>(
      ::dlsym(h, EHELF_UNWIND_REMOTE_SYMBOL));
  if (!o->info_ || !o->local_ || !o->remote_)
    return Error::plain("not an eh_elf (missing exported symbols)").in_file(path);
  if (o->info_->abi_version != EHELF_ABI_VERSION)
    return Error::plain(fmt::format("eh_elf ABI version {} (this ehelf uses {})",
                                    o->info_->abi_version, EHELF_ABI_VERSION))
        .in_file(path);
  if (!expected.empty() &&
      (o->info_->build_id_size != expected.size() ||
       std::memcmp(o->info_->build_id, expected.data(), expected.size()) != 0))
    return Error::plain("eh_elf was compiled from a different file (build-id mismatch)")
        .in_file(path);
  return o;
}

EhElfObject::~EhElfObject() {
  if (handle_) ::dlclose(handle_);
}

} // namespace ehelf
