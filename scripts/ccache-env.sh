# Sourced by build.sh and fuzz.sh from the repository's root: compiles go through ccache when it
# is installed (setup.sh installs it). CI builds a fresh clone each time; with paths taken
# relative to the clone and the working directory left out of the hash, unchanged sources are
# cache hits from one clone to the next.
if command -v ccache > /dev/null; then
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
