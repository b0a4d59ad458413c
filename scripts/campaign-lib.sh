# shellcheck shell=bash disable=SC2034,SC2154  # sourced: its variables are the campaign's
# Shared by the hostile campaigns (scripts/hostile-rerun.sh, scripts/kernel-hostile.sh): one line
# per attack, counted; timing and size helpers; sources taken from the tests' here-documents, so
# that a campaign attacks with the very programs the tests build.
# Usage: source it, set CAMPAIGN_NAME_WIDTH if the names are wider than 16 columns.
npass=0 nfail=0 nskip=0
report() { # NAME PASS|FAIL|SKIP DETAIL
  printf "%-${CAMPAIGN_NAME_WIDTH:-16}s %-4s %s\n" "$1" "$2" "$3"
  case $2 in
    PASS) npass=$((npass + 1)) ;;
    FAIL) nfail=$((nfail + 1)) ;;
    *) nskip=$((nskip + 1)) ;;
  esac
}
verdict() { # NAME CONDITION-STATUS DETAIL: PASS when the status is 0
  if [ "$2" = 0 ]; then report "$1" PASS "$3"; else report "$1" FAIL "$3"; fi
}
since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }'; } # seconds
mb() { awk -v k="$1" 'BEGIN { printf "%.1f MB", k / 1024 }'; }                  # KB as MB
# The lines of FILE after the first one containing START, up to the line TAG (a here-document).
heredoc() { # FILE START TAG
  awk -v start="$2" -v tag="$3" 'on && $0 == tag { exit } on { print } !on && index($0, start) { on = 1 }' "$1"
}
# ehelf ($ehelf) ARGS... under `ulimit -v KB` and `timeout SECONDS`, stdin from /dev/null, its
# output and errors into OUT and ERR: status in $rc, peak RSS in KB in $kb (RSS: where
# /usr/bin/time writes it), wall seconds in $secs.
run_bounded() { # KB SECONDS OUT ERR RSS ARGS...
  local limit=$1 seconds=$2 out=$3 err=$4 rss=$5 t0=$EPOCHREALTIME
  shift 5
  rc=0
  (
    ulimit -v "$limit"
    exec /usr/bin/time -f '%M' -o "$rss" timeout -k 5 "$seconds" "$ehelf" "$@"
  ) >"$out" 2>"$err" </dev/null || rc=$?
  secs=$(since "$t0")
  kb=$(tail -1 "$rss" 2>/dev/null || true)
  case $kb in '' | *[!0-9]*) kb=0 ;; esac
}
