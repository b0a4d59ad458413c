// OutputFile: the one way ehelf writes a file it was told to write (-o, --patch, --record, the
// cache). Nothing at the output path is written through or replaced by accident: a new file is
// written under a temporary name in the destination directory and renamed into place only once
// complete, so a reader sees the old file or the new one, never a partial one, and an error
// leaves the old file as it was.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <string_view>
#include <sys/types.h>

#include "support/result.hpp"

namespace ehelf {

struct OutputOptions {
  // Permission bits wanted before the umask: 0666 for data, 0777 for a program meant to run. Only
  // the 0777 bits are ever given (never setuid, setgid or sticky), and never more than the umask
  // allows.
  mode_t mode = 0666;
};

// What an existing path becomes:
// - nothing there, or a regular file: a temporary (O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode
//   0600 while written) in the same directory, fsync'ed, given its mode with fchmod on the
//   descriptor, then renamed over the path; the temporary is removed on every error path;
// - a character device (/dev/null, a terminal): written into, as compilers do; it is neither
//   replaced nor given a mode;
// - a symbolic link, a directory, a FIFO, a socket or a block device: refused, with one line
//   saying what is there (a link is neither followed nor replaced).
class OutputFile {
public:
  static Result<OutputFile> create(const std::string& path, const OutputOptions& options = {});

  OutputFile(OutputFile&&) noexcept;
  OutputFile& operator=(OutputFile&&) noexcept;
  ~OutputFile(); // not committed: the temporary is removed, the path untouched

  const std::string& path() const;
  // True when the path is a character device being written into (no rename, no mode).
  bool is_device() const;

  Status write(std::string_view bytes);
  // A buffered stream over the file, for writers that take an std::ostream; its failures are
  // reported by commit().
  std::ostream& stream();
  // Flushes, syncs, sets the mode and renames into place. The first failure of any write is
  // reported here. Errors name the output as their file ("PATH: cannot write it: REASON").
  Status commit();

private:
  struct State;
  explicit OutputFile(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// The whole of `bytes` written to `path` through an OutputFile.
Status write_output_file(const std::string& path, std::string_view bytes,
                         const OutputOptions& options = {});

} // namespace ehelf
