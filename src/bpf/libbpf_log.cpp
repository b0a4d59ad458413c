#include "bpf/libbpf_log.hpp"

#include <bpf/libbpf.h>

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <mutex>

namespace ehelf::bpf {

namespace {

std::mutex log_mutex;
std::string* log_sink = nullptr;

int keep_libbpf_message(enum libbpf_print_level level, const char* format, va_list args) {
  if (level == LIBBPF_DEBUG) return 0;
  std::lock_guard lock(log_mutex);
  if (!log_sink) return 0;
  // Whole: libbpf hands the verifier's log as one message, whose last lines are the reason.
  va_list copy;
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  if (n > 0) {
    const size_t start = log_sink->size();
    log_sink->resize(start + size_t(n) + 1);
    std::vsnprintf(log_sink->data() + start, size_t(n) + 1, format, args);
    log_sink->resize(start + size_t(n));
  }
  // Bounded: the tail is what an error shows.
  if (log_sink->size() > (1u << 20)) log_sink->erase(0, log_sink->size() - (1u << 19));
  return 0;
}

} // namespace

LibbpfLog::LibbpfLog() {
  {
    std::lock_guard lock(log_mutex);
    log_sink = &text_;
  }
  libbpf_set_print(keep_libbpf_message);
}

LibbpfLog::~LibbpfLog() {
  std::lock_guard lock(log_mutex);
  log_sink = nullptr;
}

std::string LibbpfLog::last_lines(size_t count) const {
  std::lock_guard lock(log_mutex);
  const std::string& text = text_;
  size_t pos = text.size();
  while (pos > 0 && text[pos - 1] == '\n')
    --pos;
  const size_t end = pos;
  for (size_t n = 0; n < count && pos > 0; ++n) {
    const size_t nl = text.rfind('\n', pos - 1);
    pos = nl == std::string::npos ? 0 : nl;
  }
  return text.substr(pos == 0 ? 0 : pos + 1, end - (pos == 0 ? 0 : pos + 1));
}

} // namespace ehelf::bpf
