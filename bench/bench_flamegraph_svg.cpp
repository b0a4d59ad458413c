// Folded stacks (a file) drawn as ehelf's flame-graph SVG, for bench/run_flamegraph.sh: the graph
// a recording would give, from stacks generated to a chosen size and depth.
// Usage: bench_flamegraph_svg IN.folded OUT.svg [--inverted]
#include <cstdio>
#include <cstring>
#include <fstream>

#include "perf/flamegraph.hpp"
#include "perf/folded.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: bench_flamegraph_svg IN.folded OUT.svg [--inverted]\n");
    return 2;
  }
  std::ifstream in(argv[1]);
  auto stacks = ehelf::perf::read_folded(in, argv[1]);
  if (!stacks) {
    std::fprintf(stderr, "%s\n", stacks.error().to_string().c_str());
    return 1;
  }
  ehelf::perf::FlameGraphOptions options;
  options.title = "bench_flamegraph_svg";
  options.inverted = argc > 3 && std::strcmp(argv[3], "--inverted") == 0;
  std::ofstream out(argv[2], std::ios::binary);
  ehelf::perf::write_flamegraph_svg(out, *stacks, options);
  return out ? 0 : 1;
}
