// The main job's built-in workload (scripts/run-main.sh): about two seconds of work whose stacks
// cross C, C++ and library frames, so that the flame graph `ehelf record` draws of it shows each
// kind: a C-style checksum loop, qsort calling back into our comparison (libc between our
// frames), std::sort and std::regex (libstdc++ templates), zlib's deflate (a library without
// frame pointers), and a second thread.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include <zlib.h>

namespace demo {

// Deterministic pseudo-random text: the same profile on every run.
std::string make_text(size_t bytes, uint32_t seed) {
  static const char* words[] = {"alpha", "beta",  "gamma", "delta", "epsilon", "zeta",
                                "eta",   "theta", "iota",  "kappa", "lambda",  "mu"};
  std::string text;
  uint32_t x = seed;
  while (text.size() < bytes) {
    x = x * 1664525u + 1013904223u;
    text += words[(x >> 16) % 12];
    text += (x & 7) == 0 ? "\n" : " ";
  }
  return text;
}

extern "C" __attribute__((noinline)) uint64_t checksum(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (int round = 0; round < 60; ++round)
    for (size_t i = 0; i < n; ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

extern "C" int compare_words(const void* a, const void* b) {
  return std::strcmp(*static_cast<const char* const*>(a), *static_cast<const char* const*>(b));
}

__attribute__((noinline)) size_t sort_with_qsort(std::vector<std::string>& words) {
  std::vector<const char*> ptrs;
  for (const std::string& w : words)
    ptrs.push_back(w.c_str());
  for (int round = 0; round < 6; ++round) {
    std::reverse(ptrs.begin(), ptrs.end());
    std::qsort(ptrs.data(), ptrs.size(), sizeof ptrs[0], compare_words);
  }
  return ptrs.size();
}

__attribute__((noinline)) size_t sort_with_std(std::vector<std::string> words) {
  for (int round = 0; round < 6; ++round) {
    std::reverse(words.begin(), words.end());
    std::sort(words.begin(), words.end());
  }
  return words.size();
}

__attribute__((noinline)) size_t count_matches(const std::string& text) {
  const std::regex pattern("(th|ep)[a-z]+a\\b");
  size_t n = 0;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), pattern);
       it != std::sregex_iterator(); ++it)
    ++n;
  return n;
}

__attribute__((noinline)) size_t compress(const std::string& text) {
  std::vector<unsigned char> out(compressBound(text.size()));
  uLongf size = out.size();
  compress2(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()), text.size(), 9);
  return size;
}

__attribute__((noinline)) void background_checksums(const std::string* text, uint64_t* result) {
  *result = checksum(reinterpret_cast<const unsigned char*>(text->data()), text->size());
}

} // namespace demo

int main() {
  using namespace demo;
  const std::string text = make_text(4 << 20, 42);
  std::vector<std::string> words;
  for (size_t at = 0, next; words.size() < 200000 && at < text.size(); at = next + 1) {
    next = text.find_first_of(" \n", at);
    if (next == std::string::npos) break;
    words.push_back(text.substr(at, next - at) + std::to_string(words.size() % 977));
  }
  uint64_t background = 0;
  std::thread worker(background_checksums, &text, &background);
  const size_t sorted = sort_with_qsort(words) + sort_with_std(words);
  const size_t matches = count_matches(text) + count_matches(text.substr(0, 2 << 20));
  const size_t compressed = compress(text.substr(0, 1 << 20));
  worker.join();
  std::printf("demo: %zu words sorted twice, %zu regex matches, %zu bytes compressed, checksum "
              "%016llx\n",
              sorted, matches, compressed, static_cast<unsigned long long>(background));
  return 0;
}
