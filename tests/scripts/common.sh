# Shared by the script tests that source it: $ehelf from the build directory ($1), a scratch
# $work removed on exit (background jobs killed first), ok/bad lines counted into $fail, build_id.
# Usage, first thing in a test: source "$(dirname "$0")/common.sh" "$@"
set -uo pipefail
build=$1
ehelf="$(cd "$build" && pwd)/bin/ehelf"
scripts_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)" # helpers: pprof_profile.py
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
# perf's build-id cache (perf record fills it, perf script and ehelf perf read it) private to
# this run, so that tests running side by side do not share ~/.debug (perf record crashes now and
# then in its build-id pass, "util/build-id.c:1010" and stack smashing, beside other recordings).
export PERF_BUILDID_DIR="$work/buildid-cache"
fail=0
# 1 when ehelf is built with a sanitizer (its runtime among the libraries it needs): such a build
# reserves terabytes of address space and cannot start under `ulimit -v`. Read from the file
# (readelf), not by running the loader (ldd), which did not list libasan under CI once.
sanitized=0
# (Whole outputs before grep -q: under pipefail, a producer still writing when grep -q has found
# its line dies of SIGPIPE and the pipeline fails, whatever grep found.)
grep -q 'libasan\|libtsan' <<<"$(readelf -d "$ehelf" 2>/dev/null)" && sanitized=1
# page_faults CMD ARGS...: the page faults perf stat counts in a run of CMD (empty if it cannot)
page_faults() { perf stat -x, -e page-faults -- "$@" 2>&1 > /dev/null | grep page-faults | cut -d, -f1; }
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
# wait_blocked PID PROGRAM [SYSCALL]: waits, 10 s at most, until PID runs PROGRAM (its exec
# done) and sleeps in a system call (number SYSCALL if given, as /proc/PID/syscall says): a
# process in its steady state, not one still starting. Fails when it does not get there.
wait_blocked() {
  local pid=$1 program call
  program=$(readlink -f "$2")
  for _ in $(seq 200); do
    if [ "$(readlink "/proc/$pid/exe" 2>/dev/null)" = "$program" ] &&
      [ "$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -c1)" = S ]; then
      call=$(cut -d' ' -f1 "/proc/$pid/syscall" 2>/dev/null)
      [ -z "${3:-}" ] || [ "$call" = "$3" ] && return 0
    fi
    sleep 0.05
  done
  return 1
}
build_id() { # the GNU build-id of an ELF file, in hex
  readelf -n "$1" 2>/dev/null | sed -n 's/.*Build ID: *\([0-9a-f]*\).*/\1/p' | head -1
}
source "$scripts_dir/perf_record.sh" # perf_record
