// What a dynamically linked program loads at startup: the libraries its DT_NEEDED entries name,
// found as the dynamic loader finds them. `ehelf record` loads their unwind tables before the
// command runs, so that its first samples already walk in the kernel.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "elf/elf_file.hpp"

namespace ehelf {

// A file's dynamic section, as the loader reads it: names point into the file.
struct DynamicNeeds {
  std::vector<std::string_view> needed; // DT_NEEDED, in order
  std::string_view runpath;             // DT_RUNPATH, else empty
  std::string_view rpath;               // DT_RPATH (used only without DT_RUNPATH)
  std::string_view interpreter;         // PT_INTERP's path (.interp), else empty
};
// From the file's .dynamic and the string table it links to; empty for a static file. At most
// kMaxNeeded names (a crafted file can claim any number).
DynamicNeeds dynamic_needs(const ElfFile& elf);
inline constexpr size_t kMaxNeeded = 1024;

// The interpreter and every library `program` needs, directly or through another, each once,
// breadth first as the loader loads them, found in: DT_RPATH (without DT_RUNPATH), DT_RUNPATH
// ($ORIGIN expanded), the directories of /etc/ld.so.conf (and its includes), then the system's
// (/lib/x86_64-linux-gnu, /usr/lib/x86_64-linux-gnu, /lib64, /usr/lib64, /lib, /usr/lib).
// LD_LIBRARY_PATH and LD_PRELOAD are not followed: a hint, not what will run (what runs is
// followed as it maps). At most `max` files; names not found are left out.
std::vector<std::string> needed_libraries(const std::string& program, size_t max = 256);

// The interpreter of a script ("#!/bin/sh" -> /bin/sh; "#!/usr/bin/env python3" -> what
// `find_program` makes of python3), or empty for a file that is not one (an ELF program).
std::string script_interpreter(const std::string& path,
                               const std::function<std::string(const std::string&)>& find_program);

} // namespace ehelf
