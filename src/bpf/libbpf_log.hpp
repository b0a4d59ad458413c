// libbpf's messages while a BPF program loads (the verifier's log among them), kept for the
// error that reports a refusal: one LibbpfLog at a time collects them, from its making to its
// end.
#pragma once

#include <cstddef>
#include <string>

namespace ehelf::bpf {

class LibbpfLog {
public:
  LibbpfLog();
  ~LibbpfLog();
  LibbpfLog(const LibbpfLog&) = delete;
  LibbpfLog& operator=(const LibbpfLog&) = delete;
  // The last `count` lines collected.
  std::string last_lines(size_t count) const;

private:
  std::string text_;
};

} // namespace ehelf::bpf
