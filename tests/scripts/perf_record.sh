# Sourced by the script tests that record with perf (common.sh, test_perf.sh).
# perf record, made again when perf itself dies at the end of a recording (killed by a signal or
# aborted, status 128 or more: its build-id pass, beside other recordings), three times at most.
perf_record() {
  local try status
  for try in 1 2 3; do
    perf record "$@" && return 0
    status=$?
    [ "$status" -ge 128 ] || return "$status"
    echo "perf record died (status $status), try $try of 3" >&2
  done
  return "$status"
}
