// What /proc says about another process: its mappings (/proc/PID/maps), its threads
// (/proc/PID/task), the processes of the machine (/proc) and small files' text. One reader for
// `ehelf stack`'s module map, the ptrace module, libunwind's remote spaces and `ehelf record`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ehelf {

// A /proc file's text (small files: maps, status); false if it cannot be read.
bool read_proc_file(const std::string& path, std::string& out);

// One line of /proc/PID/maps.
struct ProcMapping {
  uint64_t start = 0, end = 0;
  uint64_t offset = 0; // in the mapped file
  bool executable = false;
  bool writable = false;
  std::string path; // as the kernel prints it: a file, "[vdso]", "" (anonymous), or
                    // "FILE (deleted)"
  bool deleted() const;
  // Where the mapped file can be opened: `path`, or for a deleted file its
  // /proc/PID/map_files entry (readable by a tracer of the process).
  std::string open_path(int pid) const;
};

// Parses one line ("start-end perms offset dev inode   path"); false if it is not one.
bool parse_proc_maps_line(std::string_view line, ProcMapping& out);
// Every mapping of `pid` (`executable_only`: those with x permission); nullopt if the file
// cannot be read.
std::optional<std::vector<ProcMapping>> read_proc_maps(int pid, bool executable_only = false);

// The numeric entries of a /proc directory: the threads of a process (/proc/PID/task) or the
// processes of the machine (/proc); nullopt (errno set) if the directory cannot be read.
std::optional<std::vector<int>> proc_numeric_entries(const std::string& dir);
inline std::optional<std::vector<int>> proc_threads(int pid) {
  return proc_numeric_entries("/proc/" + std::to_string(pid) + "/task");
}
// The parent of process `pid` (/proc/PID/stat), 0 if it cannot be read.
int proc_parent(int pid);
// The state letter of process `pid` (/proc/PID/stat: R, S, D, T, t, Z, X...), 0 if it cannot be
// read (no such process).
char proc_state(int pid);
// Whether a thread of process `pid` is running or runnable now (state R).
bool proc_runs(int pid);

// Which address space process `pid` has now, as /proc/PID/stat names it: where its code and its
// stack begin (mm start_code, start_stack; an exec gives others, and with ASLR different ones).
// Both 0 when it has none (a kernel thread, a zombie); nullopt when they cannot be read (no such
// process, or not ours to read: the kernel then shows 1 and 0).
struct ProcAddressSpace {
  uint64_t start_code = 0, start_stack = 0;
  bool operator==(const ProcAddressSpace&) const = default;
};
std::optional<ProcAddressSpace> proc_address_space(int pid);

} // namespace ehelf
