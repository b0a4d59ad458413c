// MappedFile: a read-only memory mapping of a whole file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

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

private:
  MappedFile() = default;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
};

} // namespace ehelf
