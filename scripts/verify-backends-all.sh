#!/usr/bin/env bash
# Checks every unwinding backend against the interpreter (`ehelf verify`: compact table,
# rule-cache hot form, frame-pointer step; with --compiled also cached eh_elfs) on every ELF file
# with unwind tables under the given directories, and prints the totals per backend and every
# file with a mismatch or an error.
#
# Usage: scripts/verify-backends-all.sh [--ehelf PATH] [--compiled] [DIR...]
#   DIR...  default: /usr/lib/x86_64-linux-gnu (recursively) and /usr/bin
# Exit status: 0 if every backend agreed everywhere, 1 otherwise.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ehelf=""
for b in "$here/build/bin/ehelf" "$here"/build-*/bin/ehelf; do
  [ -x "$b" ] && { ehelf=$b; break; }
done
extra=()
dirs=()
while [ $# -gt 0 ]; do
  case $1 in
    --ehelf) ehelf=${2:-}; shift 2 ;;
    --compiled) extra+=(--compiled); shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "verify-backends-all: unknown option $1" >&2; exit 2 ;;
    *) dirs+=("$1"); shift ;;
  esac
done
[ ${#dirs[@]} -eq 0 ] && dirs=(/usr/lib/x86_64-linux-gnu /usr/bin)
[ -n "$ehelf" ] && [ -x "$ehelf" ] || { echo "verify-backends-all: no ehelf binary (build first)" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# ELF files (by magic), each once.
find "${dirs[@]}" -type f -size +0 2>/dev/null | sort -u | while read -r f; do
  [ "$(head -c 4 "$f" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ] && printf '%s\0' "$f"
done >"$work/files"
start=$(date +%s)
xargs -0 -n 50 "$ehelf" verify "${extra[@]}" <"$work/files" >"$work/out" 2>"$work/err"
end=$(date +%s)
files=$(tr -cd '\0' <"$work/files" | wc -c)
with_tables=$(grep -v ': no unwind tables$' "$work/out" | sed -E 's/: [a-z_ ()-]+: [0-9]+ checks.*//' | sort -u | wc -l)
echo "ELF files: $files, with tables: $with_tables, unreadable: $(grep -c . "$work/err"), $((end - start)) s"
awk -F': ' '/ checks, / {
    split($3, n, /[ ,]+/)
    b = $2; checks[b] += n[1]; agree[b] += n[3]; refuse[b] += n[5]; nh[b] += n[8]; mism[b] += n[11]
  }
  END {
    printf "%-16s %14s %14s %12s %14s %10s\n", "backend", "checks", "agree", "both refuse", "not handled", "mismatch"
    for (b in checks) printf "%-16s %14d %14d %12d %14d %10d\n", b, checks[b], agree[b], refuse[b], nh[b], mism[b]
  }' "$work/out"
bad=$(grep -E ' [1-9][0-9]* mismatches$' "$work/out")
if [ -n "$bad" ]; then
  echo "mismatches:"; echo "$bad"; grep -E '^  ' "$work/out" | head -40
  exit 1
fi
if [ -s "$work/err" ]; then echo "unreadable (first 10):"; head -10 "$work/err"; fi
exit 0
