// MappedFile: a read-only memory mapping of a whole file, guarded against truncation.
//
// Design: a file truncated while mapped (by another process, or a package upgrade rewriting it
// in place) makes reads of its lost pages fault with SIGBUS. Every mapping is registered in a
// fixed table that a SIGBUS handler (installed once, chaining to any previous handler for other
// addresses) consults: a fault inside a registered mapping replaces the lost page with a page of
// zeros and marks the mapping truncated, so the read completes and the owner reports the file as
// changed (one error naming it) instead of the process dying. When the table is full, the file is
// read into memory instead, where nothing can fault.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "support/result.hpp"

namespace ehelf {

class MappedFile {
public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const uint8_t> bytes() const { return {data_, size_}; }
  const std::string& path() const { return path_; }
  // True once a read found part of the file gone (the bytes read there were zeros).
  bool truncated() const;
  // Ok, or the one-line error naming the file if it was truncated while mapped.
  Status check_intact() const;
  // Lets the pages of [offset, offset + size) leave this process's resident memory (the whole
  // pages inside the range). Reading them again later is correct, only slower: the mapping is a
  // private read-only view of the file, so they come back from the page cache (a page of zeros
  // put in place of a truncated one comes back as zeros). A copy in memory is left as it is.
  // For readers of files larger than memory should hold (a perf.data of gigabytes).
  void release_pages(uint64_t offset, uint64_t size) const;

private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  int slot_ = -1;             // in the guard table, or -1 (a copy, or nothing mapped)
  std::vector<uint8_t> copy_; // the file's bytes when the guard table was full
  std::string path_;
};

} // namespace ehelf
