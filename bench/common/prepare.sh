# Sourced by bench/run_*.sh: from the repository's root (the caller's cwd), installs what the
# project needs (scripts/setup.sh), builds the release configuration in build/ (the targets
# given, or everything) and makes bench/results/.
bench_prepare() {
  bash scripts/setup.sh
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j2 ${1:+--target "$@"}
  mkdir -p bench/results
}
